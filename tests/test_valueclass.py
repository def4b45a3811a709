"""`value_class` makes what ``@dataclass(frozen=True)`` makes: the model's value objects behave
as frozen dataclasses to the dataclasses module and to their users, without it imported."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobscheduler.errors import Problem
from jobscheduler.model.catalog import Catalog
from jobscheduler.model.event import Event
from jobscheduler.model.job import Dependence, Job, JobGroup, Message
from jobscheduler.model.layeredmap import LayeredMap
from jobscheduler.model.policies import PauseAfterFailures, Retry
from jobscheduler.triggers.interval import Interval, Unit
from jobscheduler.valueclass import field, field_names, replaced, value_class

REPO = Path(__file__).resolve().parent.parent


@value_class(frozen=True, init=False)
class Point:
    """A value class of this test, beside its dataclass twin `DataPoint`."""

    x: int
    y: int = 0
    tags: Mapping[str, int] = field(default_factory=dict, metadata={"note": "tags"})

    def __init__(self, x: int, y: int = 0, tags: Mapping[str, int] | None = None) -> None:
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "tags", {} if tags is None else tags)


@dataclasses.dataclass(frozen=True)
class DataPoint:
    """What ``@dataclass`` makes of `Point`'s fields."""

    x: int
    y: int = 0
    tags: Mapping[str, int] = dataclasses.field(default_factory=dict, metadata={"note": "tags"})


def _fields(cls: type) -> list[tuple[Any, ...]]:
    return [
        (f.name, f.type, f.default, f.default_factory, f.init, dict(f.metadata))
        for f in dataclasses.fields(cls)
    ]


def test_the_dataclasses_module_sees_what_dataclass_would_make() -> None:
    assert dataclasses.is_dataclass(Point) and dataclasses.is_dataclass(Point(1))
    assert _fields(Point) == _fields(DataPoint)
    assert Point.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert Point.__match_args__ == DataPoint.__match_args__ == ("x", "y", "tags")
    assert field_names(Point) == ("x", "y", "tags")
    # The defaults stay as @dataclass leaves them: a default on the class, a factory's not.
    assert Point.y == DataPoint.y == 0
    assert not hasattr(Point, "tags") and not hasattr(DataPoint, "tags")


def test_equality_hash_and_repr_are_the_dataclass_ones() -> None:
    point, data = Point(1, 2, {"a": 1}), DataPoint(1, 2, {"a": 1})
    assert repr(point) == repr(data).replace("DataPoint", "Point")
    assert Point(1, 2) == Point(1, 2) and Point(1, 2) != Point(1, 3)
    assert Point(1, 2) != DataPoint(1, 2)  # another class is never equal
    assert hash(Point(1, 2, ())) == hash(Point(1, 2, ()))  # type: ignore[arg-type]
    with pytest.raises(TypeError):  # a dict field: unhashable, as with @dataclass
        hash(point)


def test_fields_are_frozen() -> None:
    point = Point(1)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'x'"):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'y'"):
        del point.y  # type: ignore[misc]


def test_replace_asdict_copy_and_pickle() -> None:
    point = Point(1, 2, {"a": 1})
    assert dataclasses.replace(point, y=5) == Point(1, 5, {"a": 1})
    assert replaced(point, y=5) == Point(1, 5, {"a": 1})
    with pytest.raises(TypeError, match="no field 'z'"):
        replaced(point, z=1)
    assert dataclasses.asdict(point) == {"x": 1, "y": 2, "tags": {"a": 1}}
    assert copy.deepcopy(point) == point
    assert pickle.loads(pickle.dumps(point)) == point


def test_the_model_classes_are_frozen_dataclasses() -> None:
    """Every value class of the model: the same fields, repr and equality as before."""
    start = datetime(2030, 1, 1)
    job = Job("a", command=["true"], start=start, interval="1 day", retry=Retry(3))
    values: list[Any] = [
        Problem("bad", file="f.yaml", line=3, job="a", key="k"),
        Interval(2, Unit.DAY),
        Dependence("a", Event.FAILED, timedelta(seconds=5)),
        Message(("ops@example.com",)),
        JobGroup("g", ["a"]),
        PauseAfterFailures(3),
        Retry(3),
        job,
        Catalog.build([job]),
    ]
    for value in values:
        assert dataclasses.is_dataclass(value)
        assert dataclasses.replace(value) == value
        names = [f.name for f in dataclasses.fields(value)]
        assert tuple(names) == field_names(value.__class__)
        shown = ", ".join(f"{name}={getattr(value, name)!r}" for name in names)
        assert repr(value) == f"{value.__class__.__qualname__}({shown})"
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, names[0], None)
    assert repr(values[0]) == (
        "Problem(message='bad', file='f.yaml', line=3, job='a', group=None, key='k')"
    )
    assert dataclasses.replace(values[0], file=None).file is None
    assert dataclasses.replace(job, name="b").name == "b"
    assert [f.name for f in dataclasses.fields(Job)][:3] == ["name", "type", "command"]
    assert Catalog().jobs == {} and type(Catalog().jobs) is LayeredMap
    assert Catalog().jobs is not Catalog().jobs  # each catalog its own map, as before


def test_the_model_loads_without_the_dataclasses_module() -> None:
    """In a fresh process, building jobs and a catalog imports neither dataclasses nor
    inspect; asking for a job's fields imports them then."""
    probe = (
        "import sys\n"
        "from datetime import datetime\n"
        "from jobscheduler.model.catalog import Catalog\n"
        "from jobscheduler.model.job import Job\n"
        "job = Job('a', command=['true'], start=datetime(2030, 1, 1), interval='1 day')\n"
        "Catalog.build([job])\n"
        "print(sorted({'dataclasses', 'inspect'} & set(sys.modules)))\n"
        "import dataclasses\n"
        "print(len(dataclasses.fields(job)) == len(dataclasses.fields(Job)) > 20)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert done.stdout.split("\n") == ["[]", "True", ""], done.stderr


def test_value_class_refuses_what_it_does_not_make() -> None:
    with pytest.raises(TypeError, match="own __init__"):

        @value_class(frozen=True, init=False)
        class NoInit:
            x: int

    with pytest.raises(TypeError, match="frozen"):
        value_class(frozen=False, init=False)
