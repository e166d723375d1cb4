"""README.md is Markdown that a hub page, a Git forge or an editor preview renders: a model folder, a teacher or any
other value a user controls must read there as its text, never become an HTML tag, a link, an image or emphasis.
The encoders (advisor.bundle.render: _md, _mdcode, _mdcell, _mdprose) are checked with a CommonMark + GFM-tables
parser over hostile and random values, and a bundle generated for a hostile folder name is parsed whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from model_configs import QWEN_SMALL

from advisor.bundle.render import _md, _mdcell, _mdcode, _mdprose
from advisor.cli import main

HOSTILE = "<img src=x onerror=alert(1)> | [link](javascript:alert(1)) ```"
HOSTILE_VALUES = [HOSTILE, "<script>alert(1)</script>", "[x](javascript:alert(1))", "![i](http://e/x.png)",
                  "<http://evil>", "&lt;b&gt;", "&#60;img&#62;", "*bold* _em_ __strong__ ~~s~~", "a\\|b", "`",
                  "``x``", "` x `", "x`", "\\", "a|b|c", "$x$", "[^1]", "<!-- c -->", "a_b_c", "```<b>`",
                  "`a``b`", "x``` `<img src=y>`"]
UNSAFE_TOKENS = {"html_inline", "html_block", "link_open", "image"}
MARKUP_TOKENS = UNSAFE_TOKENS | {"em_open", "strong_open", "s_open"}  # a value's own: the README has its bold
# printable text, weighted to the characters Markdown gives a meaning to (newlines are refused upstream)
VALUES = st.text(st.sampled_from(list("<>&[]()!`*_~|\\#$:;/=\"' .-aZ9é模")), max_size=24)


def parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def tokens(markdown: str) -> list:
    out = []

    def walk(ts):
        for t in ts:
            out.append(t)
            walk(t.children or [])

    walk(parser().parse(markdown))
    return out


def unsafe(markdown: str, kinds: set[str] = MARKUP_TOKENS) -> list[str]:
    return [t.type for t in tokens(markdown) if t.type in kinds]


def inline_content(markdown: str) -> tuple[str, list[str]]:
    """The text and code span contents of a one-paragraph document, and the inline token types."""
    inline = [t for t in tokens(markdown) if t.type in ("text", "code_inline")]
    return "".join(t.content for t in inline), [t.type for t in inline]


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_escaped_text_reads_as_the_value(value):
    text, _ = inline_content(f"x {_md(value)} y")
    assert text == f"x {value} y" and not unsafe(f"x {_md(value)} y")


@given(VALUES)
@settings(max_examples=400, deadline=None)
def test_escaped_text_reads_as_the_value_for_any_value(value):
    test_escaped_text_reads_as_the_value(value)


@given(VALUES)
@settings(max_examples=400, deadline=None)
def test_a_code_span_holds_exactly_the_value(value):
    if not value.strip():
        return  # an empty or all-space span has no content to hold
    text, kinds = inline_content(f"x {_mdcode(value)} y")
    assert kinds == ["text", "code_inline", "text"] and text == f"x {value} y"


@given(VALUES)
@settings(max_examples=400, deadline=None)
def test_a_table_cell_stays_one_cell_holding_the_value(value):
    value = value.strip()
    if not value:
        return  # an empty value is written `` as before: literal text, no span
    table = f"| a | b |\n|---|---|\n| {_mdcell(value)} | z |\n"
    cells = [t for t in tokens(table) if t.type == "td_open"]
    assert len(cells) == 2 and not unsafe(table)
    row = [t for t in tokens(table) if t.type == "inline"][-2]  # the first cell of the body row
    assert "".join(c.content for c in row.children if c.type in ("text", "code_inline")) == value


@given(st.lists(st.one_of(VALUES, st.sampled_from(["`", "``", "`code`"])), max_size=6))
@settings(max_examples=400, deadline=None)
def test_sentences_with_values_inside_never_render_markup(parts):
    sentence = " ".join(parts)
    assert not unsafe(f"x {_mdprose(sentence)} y")
    table = f"| a | b |\n|---|---|\n| {_mdprose(sentence, cell=True)} | z |\n"
    assert not unsafe(table) and len([t for t in tokens(table) if t.type == "td_open"]) == 2


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_sentences_with_hostile_values_never_render_markup(value):
    assert not unsafe(f"x {_mdprose('check `ds_report` for ' + value + ' and `' + value + '`')} y")


@pytest.mark.parametrize("text", ["Qwen/Qwen2.5-7B", "meta-llama/Llama-3.1-8B", "H100-80GB", "flash_attention_2",
                                  "TRL's max_length default (1024)", "ZeRO-3 + optimizer offload (cpu), lora r16",
                                  "strip the suffix (9.0a -> 9.0)", "/home/me/models/qwen-0.5b"])
def test_ordinary_text_is_written_as_it_is(text):
    assert _md(text) == text and _mdprose(text) == text


def test_authored_code_spans_stay_code_spans():
    assert _mdprose("check `ds_report` shows it") == "check `ds_report` shows it"
    assert _mdcode("sdpa") == "`sdpa`" and _mdcell("paged|eager") == "`paged\\|eager`"
    assert _mdcell("") == "(none)"  # not an empty pair of backticks (an unused teacher)


# ------------------------------------------------------------------------------------------- a whole bundle


def _model_folder(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(QWEN_SMALL), encoding="utf-8")
    return folder


@pytest.mark.parametrize("trainer", ["sft", "gkd"])
def test_a_hostile_model_folder_renders_as_its_name(tmp_path, capsys, monkeypatch, trainer):
    monkeypatch.chdir(tmp_path)
    folder = _model_folder(tmp_path / "fx", HOSTILE)
    argv = ["generate", "--model", f"fx/{HOSTILE}", "--trainer", trainer, "--gpu", "H200", "--out", "b"]
    if trainer == "gkd":
        argv += ["--teacher", f"fx/{HOSTILE}"]  # the teacher: a table cell and a reason
    assert main(argv) == 0, capsys.readouterr().err
    readme = (tmp_path / "b" / "README.md").read_text(encoding="utf-8")
    assert not unsafe(readme, UNSAFE_TOKENS)
    html = parser().render(readme)
    assert "<img" not in html and "<a " not in html and 'href="javascript:' not in html
    # the heading reads as the folder's path, character for character
    assert inline_content(readme.splitlines()[0][2:])[0].startswith(f"{folder.resolve()}: {trainer.upper()} full")
    # the Re-create block stays one fenced block: the value's ``` does not close it
    fences = [t for t in tokens(readme) if t.type == "fence"]
    assert fences[0].content.startswith("trl-advisor generate --model ") and HOSTILE in fences[0].content
