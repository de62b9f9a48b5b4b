import json
import sys
from pathlib import Path

import pytest

from longread.data.loaders import detect_format, iter_samples, load_samples, save_samples
from longread.data.records import Sample
from longread.errors import UsageError

# Real HotpotQA dev questions shipped with the tests (tests/data/README.md), so they always run.
HOTPOT_FILE = Path(__file__).parent / "data" / "hotpotqa_dev_excerpt.json"

HOTPOT_RECORD = {
    "_id": "q1",
    "question": "Which river flows past the castle?",
    "answer": "the Amber",
    "supporting_facts": [["Castle", 0], ["Amber", 1]],
    "context": [
        ["Castle", ["The castle stands on a hill.", " A river flows past it."]],
        ["Amber", ["The Amber is a river.", " It is long."]],
        ["Meadow", ["A meadow is green."]],
    ],
    "type": "bridge",
    "level": "easy",
}


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_canonical_round_trip(tmp_path: Path) -> None:
    samples = [
        Sample("a", "Who?", "Some context é", ["Ada", "Ada L."], {"dataset": "x", "n": 1}),
        Sample("b", "What?", "", ["42"]),
    ]
    path = tmp_path / "out" / "set.jsonl"
    assert save_samples(samples, path) == 2
    assert load_samples(path) == samples
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[0]) == samples[0].to_dict()
    assert not list(tmp_path.glob("out/*.partial"))


def test_canonical_extra_keys_are_kept_in_meta(tmp_path: Path) -> None:
    record = {
        "id": "r1",
        "question": "What is the number?",
        "context": "The number is 7.",
        "answers": ["7"],
        "meta": {"dataset": "ruler", "kind": "ruler", "length": 4096},
        "source": "my-pipeline",
    }
    (sample,) = load_samples(write_jsonl(tmp_path / "set.jsonl", [record]))
    assert sample.meta == {
        "dataset": "ruler",
        "kind": "ruler",
        "length": 4096,
        "source": "my-pipeline",
    }


def test_memagent_json_array(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "eval_50.json",
        [
            {"input": "Q1?", "context": "C1", "answers": ["A1"], "num_docs": 50},
            {"input": "Q2?", "context": "C2", "answers": ["A2", "B2"], "num_docs": 50},
        ],
    )
    samples = load_samples(path)
    assert [s.id for s in samples] == ["eval_50-0", "eval_50-1"]
    assert samples[1].question == "Q2?"
    assert samples[1].context == "C2"
    assert samples[1].answers == ["A2", "B2"]
    assert samples[0].meta == {"kind": "qa", "num_docs": 50, "source_format": "memagent"}


def test_memagent_jsonl_under_a_json_name(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "eval.json",
        [
            {"question": "Q1?", "context": "C1", "answers": "A1", "id": 7},
            {"question": "Q2?", "context": "C2", "answers": ["A2"], "id": 8},
        ],
    )
    samples = load_samples(path, format="memagent")
    assert [(s.id, s.answers) for s in samples] == [("7", ["A1"]), ("8", ["A2"])]


def test_ruler_with_and_without_context(tmp_path: Path) -> None:
    folder = tmp_path / "niah_single_1"
    folder.mkdir()
    prompt = "Some special magic numbers are hidden.\nnoise noise\nWhat is the number for x?"
    path = write_jsonl(
        folder / "validation.jsonl",
        [
            {"index": 0, "input": prompt, "outputs": ["1234567"], "length": 4096},
            {"index": 1, "input": "Q?", "context": "C", "outputs": ["7"], "length": 4096},
        ],
    )
    first, second = load_samples(path)
    assert first.id == "niah_single_1-0"  # indexes restart in every task
    assert first.question == "What is the number for x?"
    assert first.context == "Some special magic numbers are hidden.\nnoise noise"
    assert first.meta["question_split"] == "last_line"
    assert first.meta["task"] == "niah_single_1"
    assert first.meta["kind"] == "ruler"
    assert first.meta["length"] == 4096
    assert (second.question, second.context, second.answers) == ("Q?", "C", ["7"])
    assert "question_split" not in second.meta


def test_ruler_benchmark_layout_gives_the_target_length(tmp_path: Path) -> None:
    # RULER writes <length>/data/<task>/validation.jsonl with each sample's own token count.
    for length in (4096, 8192):
        for task in ("niah_single_1", "vt"):
            folder = tmp_path / str(length) / "data" / task
            folder.mkdir(parents=True)
            record = {"index": 0, "input": "Hay.\nWhat is it?", "outputs": ["7"], "length": 4000}
            write_jsonl(folder / "validation.jsonl", [record])
    samples = [load_samples(p)[0] for p in sorted(tmp_path.rglob("validation.jsonl"))]
    # Ids stay unique across the whole tree, so it can be run as one --data folder.
    assert [(s.id, s.meta["length"], s.meta["tokens"]) for s in samples] == [
        ("niah_single_1-4096-0", 4096, 4000),
        ("vt-4096-0", 4096, 4000),
        ("niah_single_1-8192-0", 8192, 4000),
        ("vt-8192-0", 8192, 4000),
    ]


def test_ruler_qa_task_is_scored_as_qa(tmp_path: Path) -> None:
    folder = tmp_path / "qa_2"
    folder.mkdir()
    path = write_jsonl(folder / "test.jsonl", [{"input": "docs\nQ?", "outputs": ["A"]}])
    assert load_samples(path)[0].meta["kind"] == "qa"


def test_memreread_documents_in_every_shape(tmp_path: Path) -> None:
    documents = [
        "Plain text.",
        ["Title B", ["Sentence one.", " Sentence two."]],
        {"title": "Title C", "text": "Body C."},
    ]
    path = write_jsonl(
        tmp_path / "mr.jsonl", [{"question": "Q?", "documents": documents, "answer": "A"}]
    )
    (sample,) = load_samples(path)
    assert sample.context == (
        "Document 1:\nPlain text.\n\n"
        "Document 2:\nTitle B\nSentence one. Sentence two.\n\n"
        "Document 3:\nTitle C\nBody C."
    )
    assert sample.answers == ["A"]
    assert sample.meta["source_format"] == "memreread"


def test_memreread_with_text_context(tmp_path: Path) -> None:
    path = write_json(tmp_path / "mr.json", [{"question": "Q?", "context": "C", "answer": "A"}])
    assert detect_format("x", {"question": "Q?", "context": "C", "answer": "A"}) == "memreread"
    assert load_samples(path)[0].context == "C"


def test_official_hotpotqa(tmp_path: Path) -> None:
    path = write_json(tmp_path / "hotpot_dev.json", [HOTPOT_RECORD])
    (sample,) = load_samples(path)
    assert sample.id == "q1"
    assert sample.answers == ["the Amber"]
    assert sample.context == (
        "Document 1:\nCastle\nThe castle stands on a hill. A river flows past it.\n\n"
        "Document 2:\nAmber\nThe Amber is a river. It is long.\n\n"
        "Document 3:\nMeadow\nA meadow is green."
    )
    assert sample.meta["supporting_facts"] == [["Castle", 0], ["Amber", 1]]
    # the supporting sentences themselves, for oracle notes (train/oracle.py)
    assert sample.meta["evidence"] == ["The castle stands on a hill.", "It is long."]
    assert sample.meta["type"] == "bridge"
    assert sample.meta["dataset"] == "hotpotqa"


def test_real_hotpotqa_file() -> None:
    records = json.loads(HOTPOT_FILE.read_text(encoding="utf-8"))
    samples = load_samples(HOTPOT_FILE)
    assert len(samples) == len(records)
    for record, sample in zip(records, samples, strict=True):
        assert sample.id == record["_id"]
        assert sample.answers == [record["answer"]]
        assert sample.context.count("Document ") >= len(record["context"])
        for title, _ in record["supporting_facts"]:
            assert f"\n{title}\n" in sample.context
        assert sample.meta["supporting_facts"] == record["supporting_facts"]
        assert sample.meta.get("type") == record.get("type")


def test_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"input": ["Q1?", "Q2?"], "context": ["C1", "C2"], "answers": [["A"], ["B"]]})
    pq.write_table(table, tmp_path / "set.parquet")
    samples = load_samples(tmp_path / "set.parquet")
    assert [(s.question, s.context, s.answers) for s in samples] == [
        ("Q1?", "C1", ["A"]),
        ("Q2?", "C2", ["B"]),
    ]
    pq.write_table(pa.table({"input": ["Q?"], "context": ["C"]}), tmp_path / "bad.parquet")
    with pytest.raises(UsageError, match=r"bad\.parquet\[row 0\]: record has no 'answers'"):
        load_samples(tmp_path / "bad.parquet", format="memagent")


def test_parquet_without_pyarrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow...` fail
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    path = tmp_path / "set.parquet"
    path.write_bytes(b"PAR1")
    with pytest.raises(UsageError) as info:
        load_samples(path)
    assert str(info.value) == "reading Parquet needs pyarrow: pip install pyarrow"


def test_missing_field_names_the_line(tmp_path: Path) -> None:
    good = {"input": "Q?", "context": "C", "answers": ["A"]}
    path = tmp_path / "set.jsonl"
    path.write_text(
        json.dumps(good) + "\n\n" + json.dumps({"context": "C", "answers": ["A"]}) + "\n"
    )
    with pytest.raises(UsageError, match=r"set\.jsonl:3: record has no 'question' or 'input'"):
        load_samples(path, format="memagent")


def test_missing_field_names_the_array_index(tmp_path: Path) -> None:
    good = {"id": "a", "question": "Q?", "context": "C", "answers": ["A"]}
    path = write_json(tmp_path / "set.json", [good, {**good, "id": "b", "answers": None}])
    with pytest.raises(UsageError, match=r"set\.json\[1\]: record has no 'answers'"):
        load_samples(path)


def test_missing_hotpot_answer(tmp_path: Path) -> None:
    record = {k: v for k, v in HOTPOT_RECORD.items() if k != "answer"}
    path = write_json(tmp_path / "hp.json", [HOTPOT_RECORD, {**record, "_id": "q2"}])
    with pytest.raises(UsageError, match=r"hp\.json\[1\]: record has no 'answer'"):
        load_samples(path, format="hotpotqa")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"input": "Q", "context": "C", "answers": []}\n', "no gold answers"),
        ('{"input": "Q", "context": "C", "answers": ["A"]}\n{oops\n', r"set\.jsonl:2: not valid"),
        ('{"input": " ", "context": "C", "answers": ["A"]}\n', "'question' is empty"),
        ('{"input": "Q", "context": "C", "answers": [{"a": 1}]}\n', "answers must be strings"),
        ('{"foo": 1}\n', "cannot tell the data format"),
        ("[1, 2]\n", "record is a list"),
        ("\n", "holds no records"),
    ],
)
def test_bad_records_are_rejected(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UsageError, match=message):
        load_samples(path)


def test_duplicate_ids_are_rejected(tmp_path: Path) -> None:
    record = {"id": "x", "question": "Q?", "context": "C", "answers": ["A"]}
    path = write_jsonl(tmp_path / "set.jsonl", [record, record])
    with pytest.raises(UsageError, match=r"set\.jsonl:2: id 'x' was already used at .*:1"):
        load_samples(path)


def test_bad_paths_and_formats(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such data file"):
        load_samples(tmp_path / "missing.jsonl")
    (tmp_path / "set.csv").write_text("a,b\n")
    with pytest.raises(UsageError, match="unknown data file type"):
        load_samples(tmp_path / "set.csv")
    with pytest.raises(UsageError, match="unknown data format"):
        load_samples(tmp_path / "set.csv", format="squad")


def test_iter_samples_streams(tmp_path: Path) -> None:
    records = [{"input": f"Q{i}?", "context": "C", "answers": ["A"]} for i in range(3)]
    records.append({"context": "C", "answers": ["A"]})
    stream = iter_samples(write_jsonl(tmp_path / "set.jsonl", records))
    assert [next(stream).question for _ in range(3)] == ["Q0?", "Q1?", "Q2?"]
    with pytest.raises(UsageError, match=":4: record has no"):
        next(stream)
