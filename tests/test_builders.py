import json
import random
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from longread.data.builders import (
    RULER_TASKS,
    build_hotpotqa,
    build_hotpotqa_to_length,
    build_ruler,
)
from longread.data.records import Sample
from longread.errors import UsageError
from longread.text import HFTokenizer, Tokenizer

from .text_helpers import RegexTokenizer, train_bpe

# Real HotpotQA dev questions shipped with the tests (tests/data/README.md), so they always run.
HOTPOT_FILE = Path(__file__).parent / "data" / "hotpotqa_dev_excerpt.json"
WORDS = [
    "amber",
    "river",
    "castle",
    "stone",
    "bright",
    "quiet",
    "green",
    "hollow",
    "north",
    "field",
    "lantern",
    "over",
]


def fake_records(count: int = 60, per_question: int = 6) -> list[dict[str, Any]]:
    """HotpotQA-shaped records; every fifth one also holds the previous record's first gold
    paragraph, as real dev questions share Wikipedia paragraphs."""
    rng = random.Random(7)
    records: list[dict[str, Any]] = []
    for i in range(count):
        context: list[list[Any]] = []
        for j in range(per_question):
            title = f"Article {i}-{j}"
            sentences = [
                " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 15))).capitalize() + "."
                for _ in range(rng.randint(1, 6))
            ]
            context.append([title, [sentences[0]] + [" " + s for s in sentences[1:]]])
        context[1][1].append(f" The answer is answer {i}.")
        if i % 5 == 1:
            context.append(records[-1]["context"][0])
        records.append(
            {
                "_id": f"q{i}",
                "question": f"Question {i}?",
                "answer": f"answer {i}",
                "supporting_facts": [[context[0][0], 0], [context[1][0], 0]],
                "context": context,
                "type": "bridge",
                "level": "easy",
            }
        )
    return records


def real_records() -> list[dict[str, Any]]:
    return json.loads(HOTPOT_FILE.read_text(encoding="utf-8"))


RECORD_SOURCES = [
    pytest.param(fake_records, id="fake"),
    pytest.param(real_records, id="hotpotqa"),
]


@pytest.fixture(scope="module")
def bpe(tmp_path_factory: pytest.TempPathFactory) -> HFTokenizer:
    return HFTokenizer.from_path(train_bpe(tmp_path_factory.mktemp("bpe")))


def titles_of(context: str) -> list[str]:
    """Document titles in order, checking the ``Document i:\\n<title>\\n<text>`` layout."""
    titles = []
    for i, block in enumerate(context.split("\n\n"), 1):
        header, title, _text = block.split("\n", 2)
        assert header == f"Document {i}:"
        titles.append(title)
    return titles


# --- RULER-HQA ---------------------------------------------------------------------------


@pytest.mark.parametrize("source", RECORD_SOURCES)
def test_hotpotqa_documents(source: Callable[[], list[dict[str, Any]]]) -> None:
    records = source()
    samples = build_hotpotqa(records, docs=40, n=6, seed=3)
    assert len(samples) == 6
    for record, sample in zip(records, samples, strict=False):
        titles = titles_of(sample.context)
        assert len(titles) == 40 == sample.meta["docs"]
        assert len(set(titles)) == 40
        own = {title for title, _ in record["context"]}
        assert own <= set(titles)
        gold = list(dict.fromkeys(t for t, _ in record["supporting_facts"]))
        assert sample.meta["gold_titles"] == gold
        assert [titles.count(t) for t in gold] == [1] * len(gold)
        assert sample.meta["gold_documents"] == [i + 1 for i, t in enumerate(titles) if t in gold]
        assert (sample.id, sample.question, sample.answers) == (
            f"{record['_id']}-40docs",
            record["question"],
            [record["answer"]],
        )
        assert sample.meta["question_id"] == record["_id"]
        assert sample.meta["dataset"] == "hotpotqa"
        assert sample.meta["kind"] == "qa"


def test_hotpotqa_paragraph_text_is_kept_whole() -> None:
    records = fake_records()
    (sample,) = build_hotpotqa(records, docs=12, n=1, seed=0)
    paragraphs = {t: "".join(s) for r in records for t, s in r["context"]}
    for block in sample.context.split("\n\n"):
        _, title, text = block.split("\n", 2)
        assert paragraphs[title] == text


def test_hotpotqa_is_deterministic_per_seed() -> None:
    records = fake_records()
    first = build_hotpotqa(records, docs=30, n=4, seed=1)
    assert build_hotpotqa(records, docs=30, n=4, seed=1) == first
    other = build_hotpotqa(records, docs=30, n=4, seed=2)
    assert all(a.context != b.context for a, b in zip(first, other, strict=True))
    # A question's sample does not depend on how many others are asked.
    assert build_hotpotqa(records, docs=30, n=2, seed=1) == first[:2]


def test_hotpotqa_fewer_documents_than_own_paragraphs_keeps_gold() -> None:
    records = fake_records()
    samples = build_hotpotqa(records, docs=3, n=5, seed=0)
    for record, sample in zip(records, samples, strict=False):
        titles = titles_of(sample.context)
        assert len(titles) == 3
        assert set(sample.meta["gold_titles"]) <= set(titles)
        assert set(titles) <= {t for t, _ in record["context"]}


def test_hotpotqa_refusals() -> None:
    records = fake_records(count=10)
    with pytest.raises(UsageError, match="cannot hold its 2 supporting paragraphs"):
        build_hotpotqa(records, docs=1, n=1, seed=0)
    with pytest.raises(UsageError, match="pass more records"):
        build_hotpotqa(records, docs=500, n=1, seed=0)
    with pytest.raises(UsageError, match="asked for 11 questions but the records hold 10"):
        build_hotpotqa(records, docs=20, n=11, seed=0)
    broken = [*records[:3], {k: v for k, v in records[3].items() if k != "answer"}]
    with pytest.raises(UsageError, match="HotpotQA record 3: record has no 'answer'"):
        build_hotpotqa(broken, docs=20, n=1, seed=0)


@pytest.mark.parametrize("source", RECORD_SOURCES)
@pytest.mark.parametrize("tokens", [2500, 8000])
def test_hotpotqa_to_length(source: Callable[[], list[dict[str, Any]]], tokens: int) -> None:
    records = source()
    tokenizer = RegexTokenizer()
    samples = build_hotpotqa_to_length(records, tokens, tokenizer, n=3, seed=5)
    for sample in samples:
        assert sample.meta["context_tokens"] == tokenizer.count(sample.context) <= tokens
        assert sample.meta["length"] == tokens
        docs = sample.meta["docs"]
        assert len(titles_of(sample.context)) == docs
        # The fixed-count builder with that many documents gives the very same context, and
        # one document more would not have fitted.
        qid = sample.meta["question_id"]
        assert sample.id == f"{qid}-{tokens}tokens"
        (same,) = [s for s in build_hotpotqa(records, docs, 3, 5) if s.meta["question_id"] == qid]
        assert same.context == sample.context
        (more,) = [
            s for s in build_hotpotqa(records, docs + 1, 3, 5) if s.meta["question_id"] == qid
        ]
        assert tokenizer.count(more.context) > tokens


def test_hotpotqa_to_length_with_a_bpe_tokenizer(bpe: HFTokenizer) -> None:
    samples = build_hotpotqa_to_length(real_records(), 6000, bpe, n=2, seed=0)
    for sample in samples:
        assert sample.meta["context_tokens"] == bpe.count(sample.context) <= 6000
        assert sample.meta["context_tokens"] > 6000 - 1000  # within a paragraph or so


def test_hotpotqa_to_length_too_short() -> None:
    with pytest.raises(UsageError, match="too short"):
        build_hotpotqa_to_length(fake_records(), 50, RegexTokenizer(), n=1, seed=0)


def test_hotpotqa_to_length_refuses_a_target_the_records_cannot_fill() -> None:
    # 20 records of 6 paragraphs hold a few thousand tokens: a 200K-token set would be a
    # short one labelled 200K, so it is refused rather than built.
    with pytest.raises(UsageError, match=r"all 11\d distractor paragraphs .* of 200000 tokens"):
        build_hotpotqa_to_length(fake_records(20), 200_000, RegexTokenizer(), n=1, seed=0)


def test_the_sets_of_a_sweep_have_distinct_ids() -> None:
    # So that a folder holding every size of a sweep can be run (and stored) as one set.
    records, tokenizer = fake_records(), RegexTokenizer()
    sweep = [*build_hotpotqa(records, 20, 3, 0), *build_hotpotqa(records, 40, 3, 0)]
    sweep += build_hotpotqa_to_length(records, 4000, tokenizer, 3, 0)
    assert len({s.id for s in sweep}) == 9
    assert len({s.meta["question_id"] for s in sweep}) == 3


# --- RULER -------------------------------------------------------------------------------

NEEDLE = re.compile(r"One of the special magic (?:numbers|uuids) for (\S+) is: (\S+)\.")


def check_niah(sample: Sample) -> None:
    pairs = NEEDLE.findall(sample.context)
    keys = sample.meta["keys"]
    found = [v for key in keys for k, v in pairs if k == key]
    assert sorted(found) == sorted(sample.answers)  # each gold once, no distractor reuse
    assert all(key in sample.question for key in keys)
    assert all(0.0 <= d <= 1.0 for d in sample.meta["depths"])
    if sample.meta["task"] == "niah_multikey_1":
        assert len({k for k, _ in pairs}) >= 4


def check_vt(sample: Sample) -> None:
    values: dict[str, str] = {}
    for line in sample.context.split("\n"):
        match = re.fullmatch(r"VAR (\w+) = (VAR (\w+)|\d+)", line)
        if match:
            name, source = match.group(1), match.group(3)
            assert source is None or source in values  # set before it is used
            values[name] = values[source] if source else match.group(2)
    value = sample.meta["value"]
    assert value in sample.question
    assert sorted(n for n, v in values.items() if v == value) == sorted(sample.answers)
    assert len(sample.answers) == 5


def check_cwe(sample: Sample) -> None:
    entries = re.findall(r"(\d+)\. (\S+)", sample.context)
    assert [int(i) for i, _ in entries] == list(range(1, len(entries) + 1))
    counts = Counter(w for _, w in entries)
    gold = sample.answers
    assert len(gold) == 10
    assert min(counts[w] for w in gold) > max(c for w, c in counts.items() if w not in gold)


def check_fwe(sample: Sample) -> None:
    counts = Counter(w for w in sample.context.split() if w != "...")
    gold = sample.answers
    assert len(gold) == 3
    assert min(counts[w] for w in gold) > max(c for w, c in counts.items() if w not in gold)


def check_qa(sample: Sample) -> None:
    titles = titles_of(sample.context)
    assert [titles.count(t) for t in sample.meta["gold_titles"]] == [1, 1]
    assert sample.meta["docs"] == len(titles)
    assert sample.meta["kind"] == "qa"


CHECKS = {"vt": check_vt, "cwe": check_cwe, "fwe": check_fwe, "qa": check_qa}


def build(task: str, tokens: int, tokenizer: Tokenizer, n: int = 2, seed: int = 0, **kw: Any):
    if task == "qa":
        kw.setdefault("hotpotqa_records", fake_records())
    return build_ruler(task, tokens, n, seed, tokenizer, **kw)


def check_sample(sample: Sample, task: str, tokens: int, tokenizer: Tokenizer) -> None:
    context_tokens = tokenizer.count(sample.context)
    total = context_tokens + tokenizer.count(sample.question)
    assert sample.meta["context_tokens"] == context_tokens
    assert sample.meta["tokens"] == total
    assert 0.99 * tokens <= total <= tokens
    assert (sample.meta["dataset"], sample.meta["task"], sample.meta["length"]) == (
        "ruler",
        task,
        tokens,
    )
    assert sample.meta["kind"] == ("qa" if task == "qa" else "ruler")
    for gold in sample.answers:
        assert gold in sample.context or gold in ("yes", "no")  # HotpotQA comparisons
    CHECKS.get(task, check_niah)(sample)


@pytest.mark.parametrize("task", RULER_TASKS)
@pytest.mark.parametrize("tokens", [4096, 8192])
def test_ruler_task(task: str, tokens: int) -> None:
    tokenizer = RegexTokenizer()
    samples = build(task, tokens, tokenizer)
    assert len({s.id for s in samples}) == 2
    for sample in samples:
        check_sample(sample, task, tokens, tokenizer)


@pytest.mark.parametrize("task", [t for t in RULER_TASKS if t != "qa"])
def test_ruler_task_at_1000_tokens(task: str) -> None:
    tokenizer = RegexTokenizer()
    for sample in build(task, 1000, tokenizer):
        check_sample(sample, task, 1000, tokenizer)


@pytest.mark.parametrize("task", RULER_TASKS)
def test_ruler_task_with_a_bpe_tokenizer(task: str, bpe: HFTokenizer) -> None:
    (sample,) = build(task, 6000, bpe, n=1)
    check_sample(sample, task, 6000, bpe)


def test_ruler_qa_on_hotpotqa() -> None:
    records = real_records()
    tokenizer = RegexTokenizer()
    samples = build_ruler("qa", 8000, 3, 0, tokenizer, hotpotqa_records=records)
    for record, sample in zip(records, samples, strict=False):
        assert sample.answers == [record["answer"]]
        assert sample.question == record["question"]
        check_sample(sample, "qa", 8000, tokenizer)


@pytest.mark.parametrize("task", RULER_TASKS)
def test_ruler_is_deterministic_per_seed(task: str) -> None:
    tokenizer = RegexTokenizer()
    first = build(task, 2000, tokenizer, seed=1)
    assert build(task, 2000, tokenizer, seed=1) == first
    other = build(task, 2000, tokenizer, seed=2)
    assert all(a.context != b.context for a, b in zip(first, other, strict=True))


@pytest.mark.parametrize("task", ["niah_single_1", "niah_single_2", "niah_multikey_2"])
def test_niah_depth_is_where_the_needle_is(task: str) -> None:
    for sample in build(task, 8000, RegexTokenizer(), n=3):
        where = sample.context.index(sample.answers[0]) / len(sample.context)
        assert where == pytest.approx(sample.meta["depth"], abs=0.05)


def test_ruler_haystack_choices(tmp_path: Path) -> None:
    tokenizer = RegexTokenizer()
    (noise,) = build("niah_single_1", 2000, tokenizer, n=1)
    assert noise.context.startswith("The grass is green.")
    assert noise.meta["haystack"] == "noise"
    (essay,) = build("niah_single_1", 2000, tokenizer, n=1, haystack="essay")
    assert essay.meta["haystack"] == "essay"
    assert "The grass is green." not in essay.context
    (needles,) = build("niah_single_1", 2000, tokenizer, n=1, haystack="needles")
    assert len(NEEDLE.findall(needles.context)) > 50
    text = tmp_path / "essay.txt"
    text.write_text("Quokkas hop across the zebra meadow. Nobody minds.\n", encoding="utf-8")
    for task in ("niah_single_2", "vt"):
        (sample,) = build(task, 2000, tokenizer, n=1, haystack=str(text))
        assert "Quokkas hop across the zebra meadow." in sample.context
        check_sample(sample, task, 2000, tokenizer)


@pytest.mark.parametrize(
    ("task", "kwargs", "message"),
    [
        ("niah_single_9", {}, "unknown RULER task"),
        ("cwe", {"haystack": "noise"}, "takes no haystack"),
        ("vt", {"haystack": "needles"}, "not needles"),
        ("vt", {"haystack": "noise-paragraphs"}, "not noise-paragraphs"),
        ("niah_single_1", {"haystack": "/no/such/file.txt"}, "or a text file"),
        ("qa", {"hotpotqa_records": []}, "needs hotpotqa_records"),
        ("vt", {"wording": "plain"}, "no needle wording"),
        ("niah_multikey_1", {"wording": "plain"}, "needs a task with one needle"),
        ("niah_single_1", {"wording": "plain", "haystack": "needles"}, "one needle"),
        ("niah_single_1", {"wording": "shouted"}, "unknown needle wording"),
    ],
)
def test_ruler_refusals(task: str, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        build_ruler(task, 2000, 1, 0, RegexTokenizer(), **kwargs)


def test_ruler_target_too_short() -> None:
    with pytest.raises(UsageError, match="too short"):
        build_ruler("niah_multiquery", 30, 1, 0, RegexTokenizer())


def test_plain_wording_is_the_demo_documents_sentence_and_question() -> None:
    for sample in build("niah_single_1", 2000, RegexTokenizer(), n=3, wording="plain"):
        (value,) = sample.answers
        assert f"The special magic number is {value}." in sample.context
        assert sample.question == "What is the special magic number mentioned in the document?"
        assert not NEEDLE.search(sample.context)
        assert sample.meta["wording"] == "plain"


@pytest.mark.parametrize("task", ["niah_single_2", "niah_multikey_1", "niah_multivalue"])
def test_another_wording_keeps_every_draw_of_rulers_own(task: str) -> None:
    """Training sets in another wording ask about the same keys, values and depths, and their
    evaluation twins (RULER's wording, the default) are unchanged by the option."""
    tokenizer = RegexTokenizer()
    ruler = build(task, 3000, tokenizer, n=4)
    secret = build(task, 3000, tokenizer, n=4, wording="secret")
    for a, b in zip(ruler, secret, strict=True):
        assert (a.answers, a.meta["depths"], a.meta["keys"]) == (
            b.answers,
            b.meta["depths"],
            b.meta["keys"],
        )
        assert "wording" not in a.meta
        for key in b.meta["keys"]:
            assert f"the secret number of {key} is" in b.context
            assert key in b.question


def test_mixed_wording_varies_by_sample_and_says_which() -> None:
    samples = build("niah_single_1", 2000, RegexTokenizer(), n=12, wording="mixed")
    assert {s.meta["wording"] for s in samples} == {"ruler", "plain", "secret"}
    needle_of = {
        "ruler": "One of the special magic numbers for {key} is: {value}.",
        "plain": "The special magic number is {value}.",
        "secret": "Remember this: the secret number of {key} is {value}.",
    }
    for sample in samples:
        needle = needle_of[sample.meta["wording"]]
        (key,), (value,) = sample.meta["keys"], sample.answers
        assert needle.format(key=key, value=value) in sample.context


def test_varied_wording_draws_every_training_wording_and_never_a_held_out_one() -> None:
    """The unseen-wording evaluation is only unseen if no training draw can produce it."""
    from longread.data._niah import HELDOUT_WORDINGS, WORDINGS

    single = build("niah_single_1", 2000, RegexTokenizer(), n=60, wording="varied")
    multi = build("niah_multikey_1", 2000, RegexTokenizer(), n=30, wording="varied")
    assert {s.meta["wording"] for s in single} == set(WORDINGS)
    keyless = {name for name, w in WORDINGS.items() if not w.keyed}
    assert keyless and not keyless & {s.meta["wording"] for s in multi}  # one needle only
    for sample in [*single, *multi]:
        wording = WORDINGS[sample.meta["wording"]]
        (key, *_), value = sample.meta["keys"], sample.answers[0]
        needle = wording.needle.format(noun="number", nouns="numbers", key=key, value=value)
        assert needle in sample.context
        for held in HELDOUT_WORDINGS.values():  # the longest stretch of each one's own words
            words = max(re.split(r"\{\w+\}", held.needle), key=len).strip()
            assert len(words) > 15 and words not in sample.context


def test_composed_wordings_differ_by_sample_and_keep_clear_of_the_held_out_ones() -> None:
    """A composed wording is new per sample (no one shape to learn), its needle stands in the
    document and its question names what the needle names; none has a held-out wording's
    features, so the unseen-wording evaluation stays unseen."""
    from longread.data._composed import PLACES
    from longread.data._niah import HELDOUT_WORDINGS

    single = build("niah_single_1", 2000, RegexTokenizer(), n=60, wording="composed")
    multi = build("niah_multikey_1", 2000, RegexTokenizer(), n=20, wording="composed")
    templates = [s.meta["needle_template"] for s in single]
    assert len(set(templates)) > 40
    assert any("{key}" not in t for t in templates)  # key-less ones where one needle
    assert all("{key}" in s.meta["needle_template"] for s in multi)
    held_words = {"shelf", "ledger", "archive", "catalogued", "harbour", "radio", "dial"}
    held_words |= {"locker", "whoever", "greenhouse", "thermostat", "tends"}
    held_words |= {"parked", "van", "bay", "storm"}
    for sample in [*single, *multi]:
        assert sample.meta["wording"] == "composed"
        template = sample.meta["needle_template"]
        (key, *_), value = sample.meta["keys"], sample.answers[0]
        assert template.format(key=key, value=value) in sample.context
        named = key if "{key}" in template else next(p for p in PLACES if p in template.lower())
        assert named in sample.question.lower()
        text = (template + " " + sample.question).lower()
        assert "'s " not in text and " reads " not in text
        assert not held_words & set(re.findall(r"[a-z]+", text))
        for held in HELDOUT_WORDINGS.values():
            words = max(re.split(r"\{\w+\}", held.needle), key=len).strip()
            assert words not in sample.context


@pytest.mark.parametrize(
    "name",
    [
        "heldout-archive",
        "heldout-ledger",
        "heldout-harbour",
        "heldout-locker",
        "heldout-greenhouse",
    ],
)
def test_a_held_out_wording_is_built_only_when_named(name: str) -> None:
    from longread.data._niah import HELDOUT_WORDINGS

    (sample,) = build("niah_single_1", 2000, RegexTokenizer(), n=1, wording=name)
    held = HELDOUT_WORDINGS[name]
    (key,), (value,) = sample.meta["keys"], sample.answers
    needle = held.needle.format(noun="number", nouns="numbers", key=key, value=value)
    assert needle in sample.context
    assert sample.question == held.question.format(noun="number", key=key)
    assert sample.meta["wording"] == name


def test_noise_paragraphs_haystack_is_the_demo_documents_layout() -> None:
    tokenizer = RegexTokenizer()
    for sample in build("niah_single_1", 3000, tokenizer, n=2, haystack="noise-paragraphs"):
        paragraphs = sample.context.strip().split("\n\n")
        assert len(paragraphs) > 5
        assert all("\n" not in p for p in paragraphs)
        (needle,) = NEEDLE.findall(sample.context)
        assert needle[1] == sample.answers[0]
        noise = [p for p in paragraphs if sample.answers[0] not in p]
        assert all(p.startswith("The grass is green.") for p in noise[:-1])
        where = sample.context.index(sample.answers[0]) / len(sample.context)
        assert where == pytest.approx(sample.meta["depth"], abs=0.05)
        check_sample(sample, "niah_single_1", 3000, tokenizer)
