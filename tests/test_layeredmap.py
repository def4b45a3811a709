"""LayeredMap behaves like an insertion-ordered dict that is never changed in place."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from jobscheduler.model.layeredmap import LayeredMap

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


branching_ops = st.lists(
    st.tuples(st.sampled_from(["set", "set", "delete", "back"]), st.integers(0, 60), st.integers()),
    max_size=300,
)


@settings(max_examples=150, deadline=None)
@given(branching_ops)
def test_deriving_from_an_older_map_leaves_every_other_map_as_it_was(
    operations: list[tuple[str, int, int]],
) -> None:
    """'back' continues from an earlier map: it branches off, and neither branch sees the
    other's changes; every map keeps its contents and order."""
    current: LayeredMap[int, int] = LayeredMap({i: i for i in range(0, 60, 3)})
    model: dict[int, int] = {i: i for i in range(0, 60, 3)}
    history: list[tuple[LayeredMap[int, int], dict[int, int]]] = [(current, dict(model))]
    for op, key, value in operations:
        if op == "back":
            current, snapshot = history[value % len(history)]
            model = dict(snapshot)
            continue
        if op == "set":
            current = current.set(key, value)
            model[key] = value
        elif key in model:
            current = current.delete(key)
            del model[key]
        history.append((current, dict(model)))
        assert list(current.items()) == list(model.items())
    for old, snapshot in history:
        assert list(old.items()) == list(snapshot.items())
        assert len(old) == len(snapshot)
        for key in range(61):
            assert old.get(key) == snapshot.get(key)
            assert (key in old) == (key in snapshot)


def test_an_old_map_far_behind_reads_its_own_contents() -> None:
    """Hundreds of changes later, an old map still reads (and derives) as it was."""
    first: LayeredMap[str, int] = LayeredMap({"a": 1})
    old = first.set("b", 2)
    current = old
    for i in range(500):
        current = current.set(f"k{i}", i).set("b", i)
    assert old["b"] == 2 and "k0" not in old and old.get("k1") is None
    assert list(old.items()) == [("a", 1), ("b", 2)]
    branch = old.set("c", 3)
    assert list(branch.items()) == [("a", 1), ("b", 2), ("c", 3)]
    assert current["b"] == 499 and len(current) == 502 and "c" not in current
    assert list(first.items()) == [("a", 1)]


def test_readers_on_other_threads_see_only_their_map() -> None:
    """A map read on other threads while it is derived from, over and over, reads the same."""
    import threading

    base: LayeredMap[int, int] = LayeredMap({i: i for i in range(100)})
    maps = [base.set(1000, 0)]
    expected = dict(maps[0].items())
    stop = threading.Event()
    failures: list[str] = []

    def read() -> None:
        while not stop.is_set():
            m = maps[0]
            if m.get(1000) != 0 or 2000 in m or m[5] != 5:
                failures.append("lookup")
            if dict(m.items()) != expected:
                failures.append("items")

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    current = maps[0]
    for i in range(3000):
        current = current.set(1000, i + 1).set(2000, i).set(i % 100, -i)
        if i % 7 == 0:
            current = current.delete(2000)
    stop.set()
    for t in readers:
        t.join()
    assert not failures


def test_copies_and_pickles_as_a_mapping() -> None:
    import copy
    import pickle

    m: LayeredMap[str, int] = LayeredMap({"a": 1}).set("b", 2).delete("a")
    assert list(pickle.loads(pickle.dumps(m)).items()) == [("b", 2)]
    assert list(copy.deepcopy(m).items()) == [("b", 2)]
