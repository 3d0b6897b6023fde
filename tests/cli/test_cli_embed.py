"""``anekit embed`` on bad input (issue 11 item 6): a line that holds no text is skipped
with a warning naming its line (an error under --strict, before anything is embedded),
the output keeps one line per input line (null where skipped), and user text reaches
the terminal as written, never as rich markup; ``anekit lanes`` likewise.

Most tests replace the lane scheduler with a recording stand-in (no worker process):
it returns the i-th unit vector for the i-th text it is given, so each output line
shows which embedded text it came from. One test embeds through a real ``numpy`` lane.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

import anekit.lanes.scheduler
from anekit.cli import cli
from anekit.embedder import Embedder
from anekit.lanes.pool import RunSummary

DIMENSION = 384  # all-MiniLM-L6-v2's


class RecordingScheduler:
    """Stands in for :class:`anekit.lanes.Scheduler`, a :class:`~anekit.lanes.Pool` and an
    Encoder to the Embedder (unit vectors): records what it is asked to embed."""

    normalized = True
    batch = 1
    dimension = DIMENSION
    model_id = "all-MiniLM-L6-v2"
    device = "recorded"

    def __init__(self, made: list[RecordingScheduler], lanes: Sequence[str] | None, **_: Any):
        self.lanes = list(lanes or [])
        self.embedded: list[list[int]] = []
        self.progress: Callable[[int, int], None] | None = None
        self.report: list[dict[str, Any]] = []
        self.notify: Callable[[str], None] | None = None
        self.summary = RunSummary()
        made.append(self)

    def stream(
        self, token_ids: Sequence[Sequence[int]]
    ) -> Iterator[tuple[int, np.ndarray | None, str | None, str]]:
        """Row i's vector is the i-th unit vector, so each output names its text; the
        lane that made it is the first asked for (as Scheduler.stream says)."""
        self.embedded += [list(ids) for ids in token_ids]
        self.summary = RunSummary(chunks=len(token_ids), embedded=len(token_ids))
        if self.progress is not None:
            self.progress(len(token_ids), len(token_ids))
        lane = self.lanes[0] if self.lanes else "cpu"
        yield from ((index, row, None, lane) for index, row in enumerate(self.embed(token_ids)))

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        return np.eye(len(token_ids), DIMENSION, dtype=np.float32)

    def providers(self) -> list[str]:
        return []

    def release_memory(self) -> None:
        pass

    def start(self) -> None:
        pass

    def status(self) -> list[dict[str, Any]]:
        return self.report

    def node_rates(self) -> list[dict[str, Any]]:
        return []

    def workers_gone_idle(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def __enter__(self) -> RecordingScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[RecordingScheduler]:
    """The schedulers the command made (the recording stand-in replaces the real one)."""
    schedulers: list[RecordingScheduler] = []
    recording = functools.partial(RecordingScheduler, schedulers)
    monkeypatch.setattr(anekit.lanes, "Scheduler", recording)  # `anekit lanes`
    monkeypatch.setattr(anekit.lanes.scheduler, "Scheduler", recording)  # open_pool's
    return schedulers


@pytest.fixture(scope="module")
def tokenize() -> Callable[[list[str]], list[list[int]]]:
    with Embedder(lanes=["numpy"]) as embedder:  # no worker starts: nothing is embedded
        return embedder.tokenize


def _embed(*args: str, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(cli, ["embed", "--lane", "numpy", *args], input=stdin)


def _outputs(result: Result) -> list[int | None]:
    """Each output line: None for null, else the index of the text its vector came from."""
    rows: list[int | None] = []
    for line in result.stdout.splitlines():
        value = json.loads(line)
        if value is None:
            rows.append(None)
        else:
            vector = np.array(value, np.float32)
            (index,) = np.flatnonzero(vector)
            assert vector[index] == 1.0 and vector.shape == (DIMENSION,)
            rows.append(int(index))
    return rows


GOOD_AND_BAD = [
    json.dumps("def add(a, b):\n    return a + b"),  # 1: a JSON string
    "42",  # 2
    json.dumps({"text": "SELECT * FROM users;"}),  # 3
    "[1,2,3]",  # 4
    '{"nottext": "x"}',  # 5
    "",  # 6
    "{bad json",  # 7
    json.dumps({"text": "[red]kept[/red] as written", "id": 8}),  # 8
    '{"text": "cut off',  # 9: the last line, no newline
]
GOOD_TEXTS = [
    "def add(a, b):\n    return a + b",
    "SELECT * FROM users;",
    "[red]kept[/red] as written",
]
ALIGNED = [0, None, 1, None, None, None, None, 2, None]  # per input line: its text, or None


@pytest.fixture
def good_and_bad(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A JSON lines file (its name is rich markup) with 3 texts among 6 bad lines."""
    monkeypatch.chdir(tmp_path)
    name = "[bold]in.jsonl"
    Path(name).write_text("\n".join(GOOD_AND_BAD), encoding="utf-8")
    return name


# --- 1. JSON lines that hold no text are skipped, each named; the output stays aligned ---


def test_bad_json_lines_are_skipped_with_a_warning_naming_each(
    good_and_bad: str, made: list[RecordingScheduler]
) -> None:
    result = _embed(good_and_bad)
    assert result.exit_code == 0, result.output
    prefix = "warning: [bold]in.jsonl, line"
    assert result.stderr.splitlines() == [
        f'{prefix} 2: 42 is not a JSON string or an object with a "text" string; skipped',
        f'{prefix} 4: [1,2,3] is not a JSON string or an object with a "text" string; skipped',
        f'{prefix} 5: {{"nottext": "x"}} has no "text" string; skipped',
        f"{prefix} 6: empty line; skipped",
        f"{prefix} 7: {{bad json is not valid JSON (Expecting property name enclosed in double "
        "quotes); skipped",
        f'{prefix} 9: {{"text": "cut off is truncated (no newline at the end, not valid JSON); '
        "skipped",
        "embedded 3 of 9 lines; 6 skipped (lines 2, 4, 5, 6, 7, 9)",
    ]


def test_skipped_lines_are_null_so_output_line_n_is_input_line_n(
    good_and_bad: str,
    made: list[RecordingScheduler],
    tokenize: Callable[[list[str]], list[list[int]]],
) -> None:
    result = _embed(good_and_bad)
    assert result.exit_code == 0, result.output
    assert _outputs(result) == ALIGNED
    (scheduler,) = made
    assert scheduler.embedded == tokenize(GOOD_TEXTS)  # the bad lines never reach a lane


def test_strict_makes_the_first_bad_line_an_error_before_anything_is_embedded(
    good_and_bad: str, made: list[RecordingScheduler]
) -> None:
    result = _embed("--strict", good_and_bad)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "error (ModelError): [bold]in.jsonl, line 2: 42 is not a JSON string or an "
        'object with a "text" string; nothing embedded (--strict; 5 more bad: lines 4, 5, 6, '
        "7, 9)\n"
    )
    assert made == []  # failed before the lanes were even set up


@pytest.mark.parametrize(
    ("second_line", "problem"),
    [
        ("{}", '{} has no "text" string'),
        ('{"text": 5}', '{"text": 5} has no "text" string'),
        ("null", 'null is not a JSON string or an object with a "text" string'),
        ("   ", "empty line"),
        ("'single'", "'single' is not valid JSON (Expecting value)"),
        (
            '"\\ud800"',
            '"\\ud800" is not valid Unicode: character 0 of its text is a lone surrogate (U+D800)',
        ),
        ('"cut', '"cut is truncated (no newline at the end, not valid JSON)'),
    ],
)
def test_strict_names_each_kind_of_bad_line(
    second_line: str, problem: str, made: list[RecordingScheduler]
) -> None:
    end = "" if second_line == '"cut' else "\n"  # only a last line with no newline is cut
    result = _embed("--strict", "-", stdin=f'"ok"\n{second_line}{end}'.encode())
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"error (ModelError): stdin, line 2: {problem}; nothing embedded (--strict)\n"
    )
    assert made == []


def test_how_input_is_read_text_lines_or_json_lines(
    tmp_path: Path,
    made: list[RecordingScheduler],
    tokenize: Callable[[list[str]], list[list[int]]],
) -> None:
    lines = ["42", "", '"quoted"', '{"nottext": "x"}']
    # auto: the first line does not begin with { or ", so each line is a text as written
    text = _embed("-", stdin="\n".join(lines).encode())
    assert text.exit_code == 0, text.output
    assert text.stderr.splitlines() == [
        "warning: stdin, line 2: empty line; skipped",
        "embedded 3 of 4 lines; 1 skipped (line 2)",
    ]
    assert _outputs(text) == [0, None, 1, 2]
    assert made[-1].embedded == tokenize(["42", '"quoted"', '{"nottext": "x"}'])
    # --format jsonl: the same lines as JSON
    jsonl = _embed("--format", "jsonl", "-", stdin="\n".join(lines).encode())
    assert jsonl.exit_code == 0, jsonl.output
    assert _outputs(jsonl) == [None, None, 0, None]
    assert made[-1].embedded == tokenize(["quoted"])
    # --format text on a *.jsonl file: lines as written, the name does not matter
    named = tmp_path / "texts.jsonl"
    named.write_text('{"text": "a"}\n"b"\n')
    forced = _embed("--format", "text", str(named))
    assert forced.exit_code == 0, forced.output
    assert made[-1].embedded == tokenize(['{"text": "a"}', '"b"'])


def test_json_lines_chosen_from_the_first_line_are_explained(
    made: list[RecordingScheduler], tokenize: Callable[[list[str]], list[list[int]]]
) -> None:
    result = _embed("-", stdin=b'{"text": "a"}\nplain words\n"b"\n')
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "warning: stdin, line 2: plain words is not valid JSON (Expecting value); skipped",
        "embedded 2 of 3 lines; 1 skipped (line 2)",
        "note: stdin was read as JSON lines (its first line begins with {); --format text "
        "embeds each line as it is",
    ]
    assert _outputs(result) == [0, None, 1]
    assert made[-1].embedded == tokenize(["a", "b"])


def test_a_last_line_cut_inside_a_utf8_character_is_skipped_as_truncated(
    made: list[RecordingScheduler],
) -> None:
    result = _embed("-", stdin=b"whole\ncaf\xc3")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "warning: stdin, line 2: truncated (no newline at the end, in the middle of a UTF-8 "
        "character); skipped",
        "embedded 1 of 2 lines; 1 skipped (line 2)",
    ]
    assert _outputs(result) == [0, None]


def test_a_line_that_is_not_utf8_is_skipped_as_null(
    made: list[RecordingScheduler], tokenize: Callable[[list[str]], list[list[int]]]
) -> None:
    """As --help says (issue 32 item 3): the other lines are embedded, that one is null
    and named on stderr, and the exit status is 0 (it was 2 with nothing embedded)."""
    result = _embed("-", stdin=b"first\ncaf\xff\nthird\n")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "warning: stdin, line 2: not valid UTF-8 (byte 4: invalid start byte); skipped",
        "embedded 2 of 3 lines; 1 skipped (line 2)",
    ]
    assert _outputs(result) == [0, None, 1]
    assert made[-1].embedded == tokenize(["first", "third"])


def test_strict_refuses_a_line_that_is_not_utf8_by_its_number(
    made: list[RecordingScheduler], tmp_path: Path
) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes(b"first\nsecond\n\xc3\x28 bad\n")
    result = _embed("--strict", str(source))
    assert result.exit_code == 2
    assert result.stderr == (
        f"error (ModelError): {source}, line 3: not valid UTF-8 (byte 1: invalid continuation "
        "byte); nothing embedded (--strict)\n"
    )
    assert result.stdout == ""
    assert made == []  # refused before any lane started


def test_the_summary_lists_ten_skipped_lines_and_counts_the_rest(
    made: list[RecordingScheduler],
) -> None:
    result = _embed("--format", "jsonl", "-", stdin=b'"a"\n' + b"42\n" * 12)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == (
        "embedded 1 of 13 lines; 12 skipped (lines 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 2 more)"
    )


# --- 2. a lone surrogate is named by its input line, like any bad line -----------------


def test_a_lone_surrogate_is_skipped_and_named_by_its_input_line(
    made: list[RecordingScheduler], tokenize: Callable[[list[str]], list[list[int]]]
) -> None:
    result = _embed("-", stdin=b'"ok"\n"ab\\udc80"\n{"text": "fine"}\n')
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        'warning: stdin, line 2: "ab\\udc80" is not valid Unicode: character 2 of its text is '
        "a lone surrogate (U+DC80); skipped",
        "embedded 2 of 3 lines; 1 skipped (line 2)",
        'note: stdin was read as JSON lines (its first line begins with "); --format text '
        "embeds each line as it is",
    ]
    assert _outputs(result) == [0, None, 1]
    assert made[-1].embedded == tokenize(["ok", "fine"])


# --- 3. text from the user or a worker is printed as written ----------------------------


def test_lanes_table_prints_worker_text_as_written(
    made: list[RecordingScheduler], monkeypatch: pytest.MonkeyPatch
) -> None:
    report = {
        "lane": "numpy",
        "state": "failed",
        "device": "[red]CPU[/red]",
        "reason": "stderr: [bold]boom[/bold]",
    }
    start = RecordingScheduler.start

    def start_reporting(self: RecordingScheduler) -> None:
        start(self)
        self.report = [dict(report)]

    monkeypatch.setattr(RecordingScheduler, "start", start_reporting)
    result = CliRunner().invoke(cli, ["lanes", "--lane", "numpy"])
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.stdout.splitlines() if line.startswith("│ numpy")]
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    assert cells == ["numpy", "failed", "[red]CPU[/red]", "", "", "", "stderr: [bold]boom[/bold]"]


# --- end to end, through one real lane worker ----------------------------------------


def test_a_real_lane_embeds_the_good_lines_in_place(good_and_bad: str) -> None:
    result = _embed(good_and_bad)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row is None for row in rows] == [index is None for index in ALIGNED]
    vectors = np.array([row for row in rows if row is not None], np.float32)
    reference = Embedder(runtime="numpy").encode(GOOD_TEXTS)
    assert vectors.shape == reference.shape
    assert ((vectors * reference).sum(1) > 0.99999).all()
    assert result.stderr.splitlines()[-1] == (
        "embedded 3 of 9 lines; 6 skipped (lines 2, 4, 5, 6, 7, 9)"
    )
