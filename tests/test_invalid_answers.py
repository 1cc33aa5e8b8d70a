"""Invalid answers are refused at copy time with a message that says what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import render

REFUSED = [
    ({"package_name": "1experiment"}, "not a Python identifier"),
    ({"package_name": "my-exp"}, "not a Python identifier"),
    ({"package_name": "class"}, "keyword or a dependency"),
    ({"package_name": "torch"}, "keyword or a dependency"),
    ({"package_name": "random"}, "module of the Python standard library"),
    ({"package_name": "json"}, "module of the Python standard library"),
    ({"loader_backend": "webdataset", "sampler": "global"}, "use sampler=shard_buffer"),
    ({"loader_backend": "arrow", "sampler": "shard_buffer"}, "use global, block or sequential"),
    ({"loader_backend": "memory", "sampler": "shard_buffer"}, "use global, block or sequential"),
    ({"loader_backend": "parquet"}, "loader_backend"),
    ({"batch_size": 0}, "batch_size must be at least 1"),
]


@pytest.mark.parametrize(("answers", "message"), REFUSED, ids=[str(a) for a, _ in REFUSED])
def test_invalid_answer_is_refused_with_a_clear_message(tmp_path: Path, answers: dict, message: str) -> None:
    destination = tmp_path / "project"
    with pytest.raises(Exception) as refused:
        render(destination, **{"package_name": "ok", **answers})
    assert message in str(refused.value), f"refusal of {answers} does not say {message!r}: {refused.value}"
    assert not destination.exists() or not any(destination.iterdir()), f"a refused copy left files in {destination}"
