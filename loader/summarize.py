"""The summarize stage: levels 1-3 of the summary tree, through any OpenAI-compatible endpoint
(the `openai` SDK) or the offline `extractive` provider.

Algorithms (the spec's): bottom-up (default) builds level 1 from the section's source text,
level 2 from its children's summaries (a part's sections, a chapter's sub-sections; a part
whose chapters have sub-sections reads the chapters' level-2 summaries), level 3 from the
book's children's summaries; direct builds level 2 from the full source text of the leaf
sections under it and level 3 from every level-1 summary. Deeper nodes are summarised first.

Incremental: each summary.md records its generator, model, algorithm, template (name and
sha256) and the sha256 of its exact inputs; it is regenerated only when one of those
changed, or with force. Levels are processed 1 -> 2 -> 3, so a changed chapter regenerates
its summary, then its part's, then the book's, and nothing else. Summaries written by the
team (generator: team) are kept unless force is given.

Window rule: the prompt is counted with tiktoken before the call; when it exceeds the
model's window minus the output reserve, the inputs (paragraphs for a section, child
summaries for a part or the book) are cut into consecutive slices that each fit, each slice
is summarised with the same template (told it sees slice k of n), and the partial summaries
are merged in order with merge.md.j2.

Anchors (docs/anchors.md): every prompt numbers the units the summary may cite (a section's
paragraphs, a part's sections, the book's children; a slice keeps the numbers of the whole) and
asks for `[§N]` anchors. Each reply is checked with loader.anchors; one that fails is sent back
with its problems (retry.md.j2) up to LLMConfig.anchor_retries times, then the node fails and
nothing is written. The extractive provider anchors each sentence to the unit it came from.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
from tqdm import tqdm

from bookrag.config import Settings
from bookrag.errors import BookragError
from bookrag.openai_client import Client, ClientConfig, RequestFailed
from loader import author_summary, frontmatter
from loader.anchors import check_body, cited_units, strip_anchors
from loader.anchors import sentences as anchor_split
from loader.chunking import paragraphs, split_sentences
from loader.detect import number_only
from loader.manifest import Book, Node, book_tree, embed_flag
from loader.tokens import count_tokens

PROMPTS = Path(__file__).resolve().parent / "prompts"
TEMPLATES = {1: "section.md.j2", 2: "part.md.j2", 3: "book.md.j2"}
CHAPTER_TEMPLATE = "chapter.md.j2"  # level 2 of a section with sub-sections (a chapter), not a part
MERGE_TEMPLATE = "merge.md.j2"
RETRY_TEMPLATE = "retry.md.j2"
WORDS = {1: "120 à 250", 2: "250 à 400", 3: "300 à 500"}
EXTRACTIVE_WORDS = {1: 180, 2: 320, 3: 420}
ALGORITHMS = ("bottom-up", "direct")


@dataclass(frozen=True)
class LLMConfig:
    model: str
    base_url: str | None
    api_key: str
    context_window: int = 32_768
    max_output_tokens: int = 1_500
    timeout: float = 300.0
    max_retries: int = 5
    anchor_retries: int = 2  # replies sent back for their anchors before the node fails


@dataclass(frozen=True)
class Item:
    heading: str
    text: str
    number: int | None = None  # the unit (§N) it belongs to; None: its position in the list
    author: bool = False  # the author's own summary of the section (loader.author_summary)


@dataclass
class Job:
    node: Node
    inputs: list[Item]
    template: str
    template_sha256: str
    inputs_sha256: str
    prompt_tokens: int
    reason: str  # why it is (re)generated, or why skipped
    units: int  # how many units (§1..§units) the summary may cite


@dataclass
class SummarizeReport:
    generated: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    kept_team: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    tokens_sent: int = 0
    requests: int = 0
    refused: int = 0  # replies sent back for their anchors

    def line(self) -> str:
        return (
            f"{len(self.generated)} generated, {len(self.skipped)} up to date, {len(self.kept_team)} team-written kept, "
            f"{len(self.failed)} failed; {self.requests} requests ({self.refused} sent back for invalid anchors), "
            f"{self.tokens_sent} prompt tokens sent"
        )


def llm_config_from_env() -> LLMConfig:
    from bookrag.config import load_settings

    s = load_settings()
    if not s.llm_model:
        raise BookragError(
            "BOOKRAG_LLM_MODEL is not set: name the chat model to summarise with "
            "(and OPENAI_BASE_URL / OPENAI_API_KEY for its endpoint), or use --provider extractive"
        )
    return LLMConfig(
        model=s.llm_model,
        base_url=s.openai_base_url,
        api_key=s.api_key,
        context_window=s.llm_context,
        max_output_tokens=s.llm_max_output,
        timeout=s.llm_timeout,
        max_retries=s.llm_retries,
    )


# --- templates -------------------------------------------------------------------------


def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(PROMPTS),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def template_sha256(name: str) -> str:
    return hashlib.sha256((PROMPTS / name).read_bytes()).hexdigest()


def numbers(inputs: list[Item]) -> list[int]:
    """The unit number of each input: its own, or its position (from 1)."""
    return [i.number if i.number is not None else k for k, i in enumerate(inputs, start=1)]


def render_prompt(
    name: str,
    book: Book,
    node: Node,
    inputs: list[Item],
    algorithm: str,
    slice_: dict | None = None,
    units: int | None = None,
    outline: list[Item] | None = None,
) -> str:
    """A prompt; `units` is how many units the whole node has (default: the inputs' last number);
    `outline`: the author's own summaries of the node (merge.md.j2: its inputs are partial summaries)."""
    nums = numbers(inputs)
    return (
        _env()
        .get_template(name)
        .render(
            outline=[{"number": i.number, "text": i.text} for i in outline or []],
            book={"title": book.title, "author": book.author, "year": book.year, "language": book.language},
            theme=book.theme,
            node={
                "heading_path": node.heading_path.removesuffix(" (résumé)"),
                "title": node.title,
                "level": node.level,
            },
            inputs=[
                {"heading": i.heading, "text": i.text, "number": n, "author": i.author}
                for i, n in zip(inputs, nums)
            ],
            algorithm=algorithm,
            slice=slice_,
            words=WORDS[node.level],
            units=units or max(nums, default=0),
        )
    )


RETRY_PROBLEMS = 10  # problems listed when a reply is sent back (the rest are counted)


def render_retry(problems: list[str], level: int, first: int, last: int) -> str:
    """The message that sends a reply back: what is wrong with its anchors, what to do."""
    return (
        _env()
        .get_template(RETRY_TEMPLATE)
        .render(
            problems=problems[:RETRY_PROBLEMS],
            more=max(len(problems) - RETRY_PROBLEMS, 0),
            level=level,
            first=first,
            last=last,
        )
    )


# --- inputs ----------------------------------------------------------------------------

#: Stands for a summary a dry run would write but has not (its text is not known yet).
PENDING_TEXT = "(résumé à générer)"


def _body(
    home: Path, source_file: str, needed_by: str, pending: frozenset[str] | set[str] = frozenset()
) -> str:
    path = home / source_file
    if not path.exists():
        if source_file in pending:
            return PENDING_TEXT
        hint = (
            "run `bookrag prepare`"
            if source_file.endswith("source.md")
            else "summarise the level below first"
        )
        raise BookragError(f"{path}: missing, needed to summarise {needed_by} ({hint})")
    return frontmatter.read(path)[1].strip()


def child_units(tree: list[Node], node: Node) -> list[Node]:
    """The children a level-2 or level-3 summary cites: §N is the N-th (loader.anchors.units_of)."""
    return [n for n in tree if n.parent_source_file == node.source_file and n.node_type == "summary"]


def unit_number(tree: list[Node], node: Node, descendant: Node) -> int:
    """The §N of the child of `node` that `descendant` is, or lies under."""
    parents = {n.source_file: n.parent_source_file for n in tree}
    units = [n.source_file for n in child_units(tree, node)]
    current: str | None = descendant.source_file
    while current is not None and current not in units:
        current = parents.get(current)
    if current is None:
        raise BookragError(f"{descendant.source_file}: not under {node.source_file}")
    return units.index(current) + 1


def input_nodes(tree: list[Node], node: Node, algorithm: str) -> list[Node]:
    """The nodes whose text a node's summary is made from, in book order."""
    children = [n for n in tree if n.parent_source_file == node.source_file]
    if node.level == 1:
        return [next(n for n in children if n.node_type == "source")]
    if node.level == 2:
        if algorithm == "direct":
            under = _descendants(tree, node)
            return [n for n in tree if n.node_type == "source" and n.parent_source_file in under]
        return [n for n in children if n.node_type == "summary"]
    if algorithm == "direct":
        return [n for n in tree if n.level == 1]
    return children


def _descendants(tree: list[Node], node: Node) -> set[str]:
    """The source_file of node and of every node under it."""
    out = {node.source_file}
    for n in tree:  # preorder: a parent comes before its children
        if n.parent_source_file in out:
            out.add(n.source_file)
    return out


def template_for(node: Node) -> str:
    """The prompt template of a node: level 2 of a section (a chapter with sub-sections) is not a part."""
    return CHAPTER_TEMPLATE if node.level == 2 and node.section is not None else TEMPLATES[node.level]


def job_inputs(
    home: Path, tree: list[Node], node: Node, algorithm: str, pending: frozenset[str] | set[str] = frozenset()
) -> list[Item]:
    """The exact inputs of a node's summary, in book order, numbered as its anchors number them:
    a section's paragraphs §1.., or each child summary (or text under it) by the child it is or
    lies under. Child summaries come without their own anchors (they number other units).
    `pending` (dry run only): summaries that would be written first; a missing one stands as
    PENDING_TEXT instead of an error."""
    picked = input_nodes(tree, node, algorithm)
    if node.level == 1:
        paras = paragraphs(_body(home, picked[0].source_file, node.source_file))
        meta = frontmatter.read(home / picked[0].source_file)[0]
        marked = set(author_summary.paragraphs_of(meta, home / picked[0].source_file, len(paras)))
        return [Item("", p, k, k in marked) for k, p in enumerate(paras, start=1)]
    if node.level == 2:
        return [
            Item(
                n.heading_path.split(" > ")[-1].removesuffix(" (résumé)"),
                strip_anchors(_body(home, n.source_file, node.source_file, pending)),
                unit_number(tree, node, n),
            )
            for n in picked
        ]
    return [
        Item(
            n.heading_path.removesuffix(" (résumé)").split(" > ", 1)[-1],
            strip_anchors(_body(home, n.source_file, node.source_file, pending)),
            unit_number(tree, node, n),
        )
        for n in picked
    ]


def inputs_sha256(inputs: list[Item]) -> str:
    """The inputs' digest; an author's summary is marked (other inputs hash as before it existed)."""
    return hashlib.sha256(
        json.dumps(
            [[i.heading, i.text, *(["author_summary"] if i.author else [])] for i in inputs],
            ensure_ascii=False,
        ).encode()
    ).hexdigest()


def summary_meta(
    book: Book,
    node: Node,
    *,
    generator: str,
    model: str | None,
    algorithm: str,
    template: str,
    template_hash: str,
    inputs_hash: str,
) -> dict:
    return {
        "book": book.slug,
        "title": node.title,
        "heading_path": node.heading_path,
        "level": node.level,
        "node_type": "summary",
        "parent_source_file": node.parent_source_file,
        "embed": embed_flag(book, node),
        "generator": generator,
        "model": model,
        "algorithm": algorithm,
        "prompt_template": template,
        "template_sha256": template_hash,
        "inputs_sha256": inputs_hash,
    }


# --- providers -------------------------------------------------------------------------


class LLM:
    """Chat completions through bookrag.openai_client (the one client configuration): its retries
    on 429/5xx/timeouts, and its errors: a key, access or model problem stops the run
    (BookragError); a request that failed after the retries fails its node (RequestFailed)."""

    def __init__(self, cfg: LLMConfig):
        self.cfg = cfg
        self.model = cfg.model
        self.client = Client(ClientConfig(cfg.base_url, cfg.api_key, cfg.timeout, cfg.max_retries))

    def complete(self, messages: list[dict[str, str]]) -> str:
        """The reply to a conversation (a prompt, or a prompt, a refused reply and its correction)."""
        reply = self.client.chat(self.cfg.model, messages, max_tokens=self.cfg.max_output_tokens)
        if not reply.text:
            raise RuntimeError("the model returned an empty summary")
        if reply.finish_reason == "length":  # cut off mid-sentence: never write it as if complete
            raise RuntimeError(
                f"the model stopped at max_tokens={self.cfg.max_output_tokens} before finishing the "
                f"summary; raise BOOKRAG_LLM_MAX_OUTPUT"
            )
        return reply.text


#: The end of a sentence that an anchor goes before: its final punctuation and closing marks.
_SENTENCE_TAIL = re.compile(r"\s*[.!?…]+[\s»”)\]]*$")


def anchor_sentence(sentence: str, unit: int) -> str:
    """The sentence with `[§unit]` before its final punctuation (docs/anchors.md)."""
    m = _SENTENCE_TAIL.search(sentence)
    cut = m.start() if m else len(sentence)
    return f"{sentence[:cut]} [§{unit}]{sentence[cut:]}"


#: What the extractive provider records as its model (a change regenerates its summaries).
EXTRACTIVE_MODEL = "extractive/thesis-tfidf-3"

#: Words that say nothing of a text's subject, left out of the extractive provider's centrality
#: (French and English function words of three letters or more: shorter words are left out anyway).
STOPWORDS = frozenset(
    """
    les des une aux ces ses mes tes nos vos leur leurs que qui quoi dont est sont été être était étaient
    sera seront serait seraient soit avoir ont avait avaient aura auraient eût fut furent fût
    pas plus moins non oui mais car donc puis ainsi aussi alors comme comment quand lorsque lorsqu
    puisque puisqu parce quelque quelques quel quelle quels quelles tout tous toute toutes autre autres
    même mêmes cette cet celui celle ceux celles ceci cela elle elles lui eux nous vous ils
    son sur sous dans par pour avec sans entre vers chez contre depuis pendant avant après selon
    très trop peu bien fort tant tel telle tels telles ici voici voilà encore déjà toujours jamais
    rien personne chaque aucun aucune plusieurs peut peuvent pourrait faire fait font doit
    the and for are but not you all any can had her was one our out has him his how its may who
    with that this from they will would there their what which when were been have into than then
    them these those such only also more most some very upon shall should could being
""".split()
)

_WORD = re.compile(r"[^\W\d_]+")


def _terms(sentence: str) -> dict[str, float]:
    """A sentence's words (lower case, three letters or more, stop words left out), each with its
    sublinear term frequency 1 + ln(count)."""
    counts: dict[str, int] = {}
    for w in _WORD.findall(sentence.lower()):
        if len(w) >= 3 and w not in STOPWORDS:
            counts[w] = counts.get(w, 0) + 1
    return {w: 1.0 + math.log(c) for w, c in counts.items()}


Vector = dict[str, float]


def tfidf_vectors(sentences: list[str]) -> list[Vector]:
    """Each sentence's TF-IDF vector among `sentences` (sublinear tf, smoothed idf over these
    sentences, l2-normalised), as a sparse dict. Pure Python: linear in the words (decision 0032)."""
    bags = [_terms(s) for s in sentences]
    df: dict[str, int] = {}
    for bag in bags:
        for w in bag:
            df[w] = df.get(w, 0) + 1
    n = len(bags)
    idf = {w: math.log((1 + n) / (1 + d)) + 1.0 for w, d in df.items()}
    vectors = []
    for bag in bags:
        v = {w: tf * idf[w] for w, tf in bag.items()}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        vectors.append({w: x / norm for w, x in v.items()})
    return vectors


def _add(into: Vector, v: Vector, sign: float = 1.0) -> None:
    for w, x in v.items():
        into[w] = into.get(w, 0.0) + sign * x


def _dot(v: Vector, c: Vector) -> float:
    return sum(x * c.get(w, 0.0) for w, x in v.items())


def _cosine(v: Vector, c: Vector) -> float:
    norm = math.sqrt(sum(x * x for x in c.values()))
    return _dot(v, c) / norm if norm else 0.0


def centrality(sentences: list[str], groups: list[int] | None = None) -> list[float]:
    """Each sentence's lexical centrality among `sentences`: the cosine of its TF-IDF vector to
    the sum of all of them (Radev's centroid; the order equals LexRank's degree without
    threshold). With `groups` (each sentence's paragraph), to the sum of the *other* paragraphs'
    sentences only: how much the rest of the section elaborates what the sentence says (a thesis)
    rather than how long it is or how much its own paragraph repeats it. Deterministic."""
    vectors = tfidf_vectors(sentences)
    centroid: Vector = {}
    for v in vectors:
        _add(centroid, v)
    own: dict[int, Vector] = {}
    for v, g in zip(vectors, groups or []):
        _add(own.setdefault(g, {}), v)
    if groups is None or len(own) < 2:  # one paragraph: no rest to measure against
        return [_cosine(v, centroid) for v in vectors]
    # cos(v, C - P) = (v·C - v·P) / |C - P|, with |C - P|² = |C|² - 2 C·P + |P|², once per paragraph P
    square = sum(x * x for x in centroid.values())
    norms = {
        g: math.sqrt(
            max(square - 2 * sum(x * centroid[w] for w, x in o.items()) + sum(x * x for x in o.values()), 0.0)
        )
        for g, o in own.items()
    }
    return [
        sum(x * (centroid[w] - own[g].get(w, 0.0)) for w, x in v.items()) / norms[g]
        if norms[g] > 1e-9
        else 0.0
        for v, g in zip(vectors, groups)
    ]


@dataclass(frozen=True)
class ExtractiveWeights:
    """How the extractive provider weighs a section's sentences besides their centrality
    (docs/decisions/0040, 0041). A sentence's score is its centrality (against the other paragraphs
    when `rest`), plus `opening` in the section's opening paragraphs and `closing` in its closing
    ones (the first and last `edge` share of the paragraphs, one at least; level 1 only, where
    the units are the author's paragraphs), plus `lead` for the first sentence of a paragraph,
    minus `aside` for a question, an exclamation, a quotation or a parenthesis. Sentences are
    taken best first, each less `redundancy` times its cosine to the closest one already taken
    (maximal marginal relevance), within the level's word budget. `title` adds that weight times
    the sentence's cosine to the section's title (level 1 only, decision 0042): the sentence that
    answers what the heading announces, as a reader reads the heading first."""

    opening: float = 0.0
    closing: float = 0.0
    lead: float = 0.0
    aside: float = 0.0
    redundancy: float = 0.0
    rest: bool = False
    edge: float = 0.15
    title: float = 0.0


#: Decision 0032's ranking (centrality alone, to the centroid of all): the baseline measured against.
CENTROID_ONLY = ExtractiveWeights()
#: The provider's weights, chosen on the tuning halves of the shipped books' chapters and of their
#: synthesis questions, among those that keep a section's thesis ahead of a digression
#: (`python -m evaluation.extractive --grid`; decisions 0040, 0041, 0042).
EXTRACTIVE_WEIGHTS = ExtractiveWeights(
    opening=0.1, closing=0.1, lead=0.1, aside=0.1, redundancy=0.6, title=1.0
)

_ASIDE_START = ("«", "—", "–", "(", '"', "“", "-")


def is_aside(sentence: str) -> bool:
    """A question, an exclamation, a quotation, a line of dialogue or a parenthesis: the text
    around a thesis, not the thesis (the author's own rhetorical questions included)."""
    s = sentence.strip()
    return s.startswith(_ASIDE_START) or s.rstrip("»”\")' ").endswith(("?", "!"))


def sentence_scores(
    found: list[tuple[str, int, int, int]],
    paragraphs_count: int,
    level: int,
    w: ExtractiveWeights,
    title: str = "",
) -> tuple[list[float], list[Vector]]:
    """The score of each (sentence, unit, paragraph index, index in the paragraph) by `w`, and
    the sentences' TF-IDF vectors (for the redundancy term)."""
    sentences = tuple(f[0] for f in found)
    scores, vectors = _lexical(sentences, tuple(f[2] for f in found) if w.rest else None)
    titled = _title_similarity(sentences, title) if w.title and title else (0.0,) * len(found)
    edge = max(1, math.ceil(paragraphs_count * w.edge))
    out = []
    for score, near, (s, _unit, k, j) in zip(scores, titled, found):
        if level == 1:
            score += w.opening * (k < edge) + w.closing * (k >= paragraphs_count - edge) + w.title * near
        score += w.lead * (j == 0) - w.aside * is_aside(s)
        out.append(score)
    return out, list(vectors)


@functools.lru_cache(maxsize=128)
def _title_similarity(sentences: tuple[str, ...], title: str) -> tuple[float, ...]:
    """Each sentence's cosine to the title, in the TF-IDF space of the sentences and the title
    (a title word every sentence repeats weighs little). Cached as `_lexical` is."""
    *vectors, heading = tfidf_vectors([*sentences, title])
    return tuple(_dot(v, heading) for v in vectors)


@functools.lru_cache(maxsize=128)
def _lexical(
    sentences: tuple[str, ...], groups: tuple[int, ...] | None
) -> tuple[tuple[float, ...], tuple[Vector, ...]]:
    """centrality and tfidf_vectors of a section's sentences, kept for the next calls with the same
    sentences (evaluation.extractive's grid weighs each of the 53 tuning chapters' sentences, both
    ways, hundreds of times; 128 sections of sparse vectors are tens of MB at most)."""
    return tuple(centrality(list(sentences), None if groups is None else list(groups))), tuple(
        tfidf_vectors(list(sentences))
    )


def extractive_summary(
    inputs: list[Item],
    level: int,
    weights: ExtractiveWeights | None = None,
    budget: int | None = None,
    title: str = "",
) -> str:
    """Deterministic offline summary, the author's words arranged by a program: the sentences a
    reader would pick (`ExtractiveWeights`, EXTRACTIVE_WEIGHTS by default; lexical, no embedding:
    decisions 0032, 0040), kept in text
    order within a word budget, three sentences per paragraph, each anchored to the unit
    (paragraph, child) it came from. A section holding the author's own summaries starts with
    their phrases, in order, each anchored to its paragraph (decision 0035); they count in the
    budget, and the sentences of the other paragraphs fill what is left (one at least).
    `budget`: words (default: the level's, EXTRACTIVE_WORDS). `title`: the section's
    (`own_title`), for the weights' title term."""
    weights = EXTRACTIVE_WEIGHTS if weights is None else weights  # read now: evaluation sets it
    units = numbers(inputs)
    own: list[str] = []
    budget, used = budget or EXTRACTIVE_WORDS[level], 0
    for s, n in (
        (s, n)
        for item, n in zip(inputs, units)
        if item.author
        for phrase in author_summary.phrases(item.text)
        for _off, s in anchor_split(phrase)
    ):
        if own and used + len(s.split()) > budget:
            break  # the author's phrases in order, within the budget
        own.append(anchor_sentence(s, n))
        used += len(s.split())
    found = [
        (s, n, k, j)
        for k, (item, n) in enumerate(zip(inputs, units))
        if not item.author
        for j, s in enumerate(
            s
            for p in paragraphs(item.text)
            for s in split_sentences(p)
            if len(s.split()) >= 4 and not s.startswith("[^")
        )
    ]
    if not found and not own:
        raise RuntimeError("no sentence to extract")
    scores, vectors = sentence_scores(found, len(inputs), level, weights, title) if found else ([], [])
    chosen: list[int] = []
    closest = [0.0] * len(found)  # each sentence's cosine to the closest one chosen
    left = list(range(len(found)))
    while left:
        # best first (ties keep text order); a choice changes the redundancy terms, hence the sort again.
        # A sentence over the budget stays over it (the budget only fills): it leaves the candidates.
        left.sort(key=lambda i: (-(scores[i] - weights.redundancy * closest[i]), i))
        over = 0
        while over < len(left) and used + len(found[left[over]][0].split()) > budget and chosen:
            over += 1
        if over == len(left):
            break
        i = left[over]
        left = left[over + 1 :]
        chosen.append(i)
        used += len(found[i][0].split())
        if used >= budget * 0.9:
            break
        if weights.redundancy:
            for o in left:
                closest[o] = max(closest[o], _dot(vectors[i], vectors[o]))
    picked = [anchor_sentence(found[i][0], found[i][1]) for i in sorted(chosen)]
    blocks = [" ".join(own)] if own else []
    return "\n\n".join(blocks + [" ".join(picked[i : i + 3]) for i in range(0, len(picked), 3)])


# --- planning and running --------------------------------------------------------------


def own_title(node: Node) -> str:
    """What a node's heading says of its subject, for the extractive provider's title term: its
    title, or nothing for a title that is a label and a number only (`add` titles a chapter
    without a printed title by its label, « Chapitre XIV », whose words say nothing of it)."""
    return "" if number_only(node.title) else node.title


def summary_nodes(tree: list[Node], levels: set[int] | None) -> list[Node]:
    """The summaries to write, each after every summary it reads: by level, the deepest first."""
    nodes = [n for n in tree if n.node_type == "summary" and (levels is None or n.level in levels)]
    return sorted(nodes, key=lambda n: (n.level, -n.depth if n.level == 2 else 0, n.order))


def plan_job(
    home: Path,
    book: Book,
    tree: list[Node],
    node: Node,
    algorithm: str,
    pending: frozenset[str] | set[str] = frozenset(),
) -> Job:
    alg = "bottom-up" if node.level == 1 else algorithm
    inputs = job_inputs(home, tree, node, alg, pending)
    name = template_for(node)
    units = len(inputs) if node.level == 1 else len(child_units(tree, node))
    prompt = render_prompt(name, book, node, inputs, alg, units=units)
    return Job(
        node, inputs, name, template_sha256(name), inputs_sha256(inputs), count_tokens(prompt), "", units
    )


def stale_reason(home: Path, job: Job, generator: str, model: str, algorithm: str) -> str | None:
    """Why the existing summary.md must be regenerated, or None when it is current."""
    path = home / job.node.source_file
    if not path.exists():
        return "missing"
    meta, body = frontmatter.read(path)
    if not body.strip():
        return "empty"
    checks = [
        ("generator", generator),
        ("model", model),
        ("title", job.node.title),  # the prompt's heading; the extractive provider's title term
        ("algorithm", "bottom-up" if job.node.level == 1 else algorithm),
        ("prompt_template", job.template),
        ("template_sha256", job.template_sha256),
        ("inputs_sha256", job.inputs_sha256),
    ]
    for key, want in checks:
        if meta.get(key) != want:
            return f"{key} changed"
    return None


def _slices(job: Job, book: Book, alg: str, limit: int) -> list[list[Item]]:
    """Consecutive groups of inputs whose rendered prompt fits in `limit` tokens."""
    groups: list[list[Item]] = [[]]
    for item in job.inputs:
        trial = groups[-1] + [item]
        if (
            groups[-1]
            and count_tokens(
                render_prompt(job.template, book, job.node, trial, alg, {"index": 1, "count": 2}, job.units)
            )
            > limit
        ):
            groups.append([item])
        else:
            groups[-1] = trial
        if (
            count_tokens(
                render_prompt(
                    job.template, book, job.node, groups[-1], alg, {"index": 1, "count": 2}, job.units
                )
            )
            > limit
        ):
            raise BookragError(
                f"{job.node.source_file}: one input ({item.heading or 'a paragraph'}) alone exceeds the "
                f"model's window ({limit} prompt tokens); raise BOOKRAG_LLM_CONTEXT"
            )
    return groups


class InvalidAnchors(RuntimeError):
    """A summary whose anchors are still wrong after the retries: the node fails, nothing is written."""


def anchor_problems(text: str, level: int, units: int, allowed: list[int] | None = None) -> list[str]:
    """What is wrong with the anchors of a generated summary, one line each (empty: it may be
    written): loader.anchors' checks (well-formed, in 1..units, spans of at most 5, every
    level-1 sentence anchored), at least one anchor at every level, and, for a slice's summary,
    only the units it was given (`allowed`)."""
    problems = [f"line {p.line}: {p.message}" for p in check_body(text, 1, units, every_sentence=level == 1)]
    if problems:
        return problems
    cited = cited_units(text)
    if not cited:
        return [
            f"no anchor at all: end the sentences with the numbers of the units they draw on ([§1] to [§{units}])"
        ]
    outside = [u for u in cited if u not in allowed] if allowed else []
    if allowed and outside:
        problems.append(f"§{outside[0]} is not in the text given (§{min(allowed)}–§{max(allowed)})")
    return problems


def complete_anchored(
    llm: LLM, prompt: str, level: int, units: int, report: SummarizeReport, allowed: list[int] | None = None
) -> str:
    """The model's reply to a prompt once its anchors pass anchor_problems. A reply that fails is
    sent back with its problems (the prompt, the reply, then retry.md.j2), at most
    anchor_retries times; then InvalidAnchors."""
    limit = llm.cfg.context_window - llm.cfg.max_output_tokens
    first, last = (min(allowed), max(allowed)) if allowed else (1, units)
    messages = [{"role": "user", "content": prompt}]
    attempts = 1 + llm.cfg.anchor_retries
    problems: list[str] = []
    reply = ""
    for _ in range(attempts):
        if problems:  # send the refused reply back with what is wrong with it
            correction = render_retry(problems, level, first, last)
            messages = [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": reply},
                {"role": "user", "content": correction},
            ]
            if sum(count_tokens(m["content"]) for m in messages) > limit:  # no room for the refused reply
                messages = [{"role": "user", "content": f"{prompt.rstrip()}\n\n{correction}"}]
        report.requests += 1
        report.tokens_sent += sum(count_tokens(m["content"]) for m in messages)
        reply = llm.complete(messages)
        problems = anchor_problems(reply, level, units, allowed)
        if not problems:
            return reply
        report.refused += 1
    raise InvalidAnchors(
        f"the reply's anchors were still invalid after {attempts} attempts: " + "; ".join(problems[:3])
    )


def generate(
    job: Job, book: Book, alg: str, llm: LLM | None, report: SummarizeReport, say: Callable[[str], None]
) -> str:
    level = job.node.level
    if llm is None:
        text = extractive_summary(job.inputs, level, title=own_title(job.node))
        problems = anchor_problems(text, level, job.units)
        if problems:  # a bug, not the text's fault: never written
            raise InvalidAnchors("the extractive summary's anchors are invalid: " + "; ".join(problems[:3]))
        return text
    limit = llm.cfg.context_window - llm.cfg.max_output_tokens
    if job.prompt_tokens <= limit:
        return complete_anchored(
            llm,
            render_prompt(job.template, book, job.node, job.inputs, alg, units=job.units),
            level,
            job.units,
            report,
        )
    groups = _slices(job, book, alg, limit)
    say(
        f"{job.node.source_file}: prompt of {job.prompt_tokens} tokens exceeds the window ({limit}); "
        f"summarising {len(groups)} slices then merging"
    )
    partials = []
    for k, group in enumerate(groups, start=1):
        prompt = render_prompt(
            job.template, book, job.node, group, alg, {"index": k, "count": len(groups)}, job.units
        )
        partials.append(
            Item(f"{k}", complete_anchored(llm, prompt, level, job.units, report, numbers(group)))
        )
    outline = [Item(i.heading, i.text, n, True) for i, n in zip(job.inputs, numbers(job.inputs)) if i.author]
    prompt = render_prompt(MERGE_TEMPLATE, book, job.node, partials, alg, units=job.units, outline=outline)
    return complete_anchored(llm, prompt, level, job.units, report)


def summarize_book(
    settings: Settings,
    book: Book,
    *,
    provider: str = "llm",
    levels: set[int] | None = None,
    algorithm: str = "bottom-up",
    force: bool = False,
    dry_run: bool = False,
    llm_config: LLMConfig | None = None,
    progress: bool = True,
    say: Callable[[str], None] = print,
) -> SummarizeReport:
    if algorithm not in ALGORITHMS:
        raise BookragError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    if provider not in ("llm", "extractive"):
        raise BookragError(f"provider must be llm or extractive, got {provider!r}")
    llm = None
    if provider == "llm":
        llm = LLM(llm_config or llm_config_from_env())
    generator = "llm" if llm else "extractive"
    model = llm.model if llm else EXTRACTIVE_MODEL
    tree = book_tree(book)
    report = SummarizeReport()
    nodes = summary_nodes(tree, levels)
    failed_files: set[str] = set()
    pending: set[str] = set()  # dry run: the summaries it would (re)generate
    bar = tqdm(total=len(nodes), unit="summary", desc=book.slug, disable=not progress or dry_run)
    try:
        for node in nodes:
            bar.set_postfix(tokens=report.tokens_sent)
            if any(n.parent_source_file == node.source_file and n.source_file in failed_files for n in tree):
                report.failed.append(node.source_file)
                failed_files.add(node.source_file)
                bar.update(1)
                continue
            alg = "bottom-up" if node.level == 1 else algorithm
            job = plan_job(settings.home, book, tree, node, algorithm, pending)
            path = settings.home / node.source_file
            existing = frontmatter.read(path)[0] if path.exists() else {}
            reason = stale_reason(settings.home, job, generator, model, algorithm)
            # A dry run writes nothing, so a summary whose inputs it would regenerate still looks
            # current (or its inputs are missing): it would be regenerated too.
            changing = [n.source_file for n in input_nodes(tree, node, alg) if n.source_file in pending]
            if changing and reason is None:
                reason = f"{len(changing)} input summaries would be regenerated"
            if not force and existing.get("generator") == "team":
                report.kept_team.append(node.source_file)
                bar.update(1)
                continue
            if reason is None and not force:
                report.skipped.append(node.source_file)
                bar.update(1)
                continue
            if dry_run:
                estimate = " (estimate: the new input summaries are not written yet)" if changing else ""
                say(
                    f"would generate {node.source_file} (level {node.level}, {reason or 'forced'}): "
                    f"{job.prompt_tokens} prompt tokens{estimate}"
                )
                pending.add(node.source_file)
                report.generated.append(node.source_file)
                continue
            try:
                body = generate(job, book, alg, llm, report, say)
            except Exception as exc:
                # A request that failed after the retries, or a reply that cannot be used (empty,
                # cut off, bad anchors): record, go on. Any other BookragError (a key, access or
                # model problem) stops the run.
                if isinstance(exc, BookragError) and not isinstance(exc, RequestFailed):
                    raise
                say(f"failed: {node.source_file}: {exc}")
                report.failed.append(node.source_file)
                failed_files.add(node.source_file)
                bar.update(1)
                continue
            meta = summary_meta(
                book,
                node,
                generator=generator,
                model=model,
                algorithm=alg,
                template=job.template,
                template_hash=job.template_sha256,
                inputs_hash=job.inputs_sha256,
            )
            # Ctrl-C cannot cut a write in half: the file is renamed into place whole, and a
            # Ctrl-C arriving meanwhile stops the run right after it.
            with _sigint_deferred():
                frontmatter.write_atomic(path, frontmatter.render(meta, body))
            report.generated.append(node.source_file)
            bar.update(1)
    finally:
        bar.close()
    return report


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold SIGINT back for the duration of the block, then deliver it to the previous handler
    (usually KeyboardInterrupt). Ignoring it instead would silently drop a Ctrl-C that lands
    during a write and let the run go on."""
    if not _main_thread():  # signal handlers can only be set from the main thread
        yield
        return
    caught: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        # None: the previous handler was not set from Python; Python's own default is the best stand-in.
        signal.signal(signal.SIGINT, old if old is not None else signal.default_int_handler)
    if caught:
        signal.raise_signal(signal.SIGINT)
