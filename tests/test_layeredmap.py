"""LayeredMap behaves like an insertion-ordered dict that is never changed in place."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from jobscheduler.layeredmap import LayeredMap

ops = st.lists(
    st.tuples(st.sampled_from(["set", "delete"]), st.integers(0, 40), st.integers()),
    max_size=400,
)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_matches_a_dict_and_old_versions_never_change(
    operations: list[tuple[str, int, int]],
) -> None:
    current: LayeredMap[int, int] = LayeredMap()
    model: dict[int, int] = {}
    history: list[tuple[LayeredMap[int, int], dict[int, int]]] = []
    for op, key, value in operations:
        history.append((current, dict(model)))
        if op == "set":
            current = current.set(key, value)
            model[key] = value
        elif key in model:
            current = current.delete(key)
            del model[key]
        assert list(current.items()) == list(model.items())
        assert len(current) == len(model)
    for old, snapshot in history:
        assert list(old.items()) == list(snapshot.items())
        for key in range(41):
            assert (key in old) == (key in snapshot)


def test_missing_key_raises_and_delete_of_missing_raises() -> None:
    m: LayeredMap[str, int] = LayeredMap({"a": 1})
    assert m.delete("a").get("a") is None
    try:
        m.delete("b")
    except KeyError:
        pass
    else:
        raise AssertionError("delete of a missing key must raise")


def test_readded_key_goes_to_the_end() -> None:
    m: LayeredMap[str, int] = LayeredMap({"a": 1, "b": 2, "c": 3})
    m = m.delete("a").set("a", 9)
    assert list(m.items()) == [("b", 2), ("c", 3), ("a", 9)]
    assert list(m.set("b", 5).items()) == [("b", 5), ("c", 3), ("a", 9)]
