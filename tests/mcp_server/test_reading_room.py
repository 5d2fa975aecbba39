"""The reading room over HTTP (Starlette's TestClient, in process, the real database): its
pages, its links into the text, and bad input answered by a status and one sentence."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from mcp_server.http import http_app
from mcp_server.server import AppState, Running, build_server
from tests.conftest import settings_for
from tests.mcp_server.conftest import NOTED

BOOK = "traite-des-echanges"
BAKER = f"/books/{BOOK}/premiere-partie/chapitre-01-le-boulanger"
ROADS = f"/books/{BOOK}/{NOTED}"


def client_for(settings) -> TestClient:
    running = Running()
    return TestClient(
        http_app(build_server(settings, running=running), settings, "127.0.0.1", running),
        base_url="http://127.0.0.1:8765",
    )


@pytest.fixture(scope="module")
def room(room_url, room_home) -> Iterator[TestClient]:
    with client_for(settings_for(room_home, room_url)) as client:
        yield client


def error_sentence(html: str) -> str:
    found = re.search(r'<p class="error">(.*?)</p>', html)
    assert found, html
    return found.group(1).replace("&#39;", "'").replace("&lt;", "<").replace("&gt;", ">")


def test_the_pages_use_the_mcp_servers_pool(room_url, room_home):
    """The state build_server's lifespan creates is the one the pages read, through the Running
    both were given: filled while the app runs, empty before and after (the pool closed)."""
    settings = settings_for(room_home, room_url)
    running = Running()
    app = http_app(build_server(settings, running=running), settings, "127.0.0.1", running)
    assert running.state is None
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        state = running.state
        assert isinstance(state, AppState)
        assert client.get("/").status_code == 200
        assert state.pool.get_stats()["connections_num"] >= 1
        assert "user=bookrag_mcp" in state.pool.conninfo  # the MCP server's read-only role
    assert running.state is None and state.pool.closed


def test_a_page_asked_before_the_server_started_says_so(room_url, room_home):
    """The reading room of a server whose state is not there yet answers 503 and one sentence."""
    settings = settings_for(room_home, room_url)
    app = http_app(build_server(settings), settings, "127.0.0.1", Running())  # never filled
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        r = client.get("/")
    assert r.status_code == 503
    assert error_sentence(r.text) == "the server is starting; reload the page in a moment"


def test_the_library_lists_the_books(room):
    r = room.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert (
        f'<a href="/books/{BOOK}" lang="fr"><cite>Petit traité des échanges</cite></a>, <span lang="fr">Équipe bookrag</span> (2026)'
        in r.text
    )
    assert "<script" not in r.text
    assert "default-src 'none'" in r.headers["content-security-policy"]


def test_the_book_page_is_its_tree_with_summaries_folded(room):
    html = room.get(f"/books/{BOOK}").text
    assert '<h1 lang="fr">Petit traité des échanges</h1>' in html
    order = [
        html.index(f'<li id="{f}">')
        for f in (
            "avant-propos",
            "premiere-partie",
            "premiere-partie/chapitre-01-le-boulanger",
            "premiere-partie/chapitre-02-les-routes",
            "deuxieme-partie",
            "deuxieme-partie/chapitre-01-la-monnaie",
            "deuxieme-partie/chapitre-02-l-impot",
        )
    ]
    assert order == sorted(order)
    assert html.count("<details") == 8  # the book, two parts, five sections
    # a chapter summary's sentences link to the paragraphs they cite; a part's to its chapters
    assert f'<a class="anchor" href="{BAKER}?hl=2-3#p2">[§2–3]</a>' in html
    assert (
        f'<a class="anchor" href="{BAKER}">[Chapitre I]</a> '
        f'<a class="anchor" href="/books/{BOOK}/{NOTED}">[Chapitre II]</a>'
    ) in html  # in the book's order


def test_a_part_page_is_its_subtree(room):
    html = room.get(f"/books/{BOOK}/premiere-partie").text
    assert '<h1 lang="fr">Première partie</h1>' in html and 'id="summary-1"' in html
    assert f'href="{BAKER}"' in html and "La monnaie" not in html
    assert f'<a href="/books/{BOOK}" lang="fr">Petit traité des échanges</a>' in html  # the trail


def test_a_chapter_page(room):
    html = room.get(BAKER).text
    assert '<h1 lang="fr">Chapitre I (Le boulanger)</h1>' in html
    # the summary sentence, its anchor a link highlighting what it cites
    assert (
        '<span class="sentence" id="s-0-0">Le chapitre sur le boulanger soutient que la division du travail enrichit '
        "le village : le boulanger se spécialise, et chacun mange un meilleur pain pour moins d&#39;effort. "
        f'<a class="anchor" href="{BAKER}?hl=2-3#p2">[§2–3]</a></span>'
    ) in html
    # paragraphs numbered as citations number them, each with its own id
    assert re.findall(r'<p id="p(\d+)" class="para', html) == ["1", "2", "3"]
    assert (
        '<p id="p1" class="para"><a class="num" href="#p1" aria-label="paragraph 1">§1</a> Avant l&#39;aube'
        in html
    )
    assert ' hl"' not in html
    # the cited paragraphs link back to the sentence; the pager links to the neighbours
    assert html.count('<a class="cited-by" href="#s-0-0"') == 2
    assert f'<a rel="prev" href="/books/{BOOK}/avant-propos">' in html
    assert f'<a rel="next" href="{ROADS}">' in html


def test_highlighted_paragraphs_are_marked(room):
    html = room.get(f"{BAKER}?hl=2-3").text
    assert re.findall(r'<p id="p(\d+)" class="para hl"', html) == ["2", "3"]
    assert "Highlighted: §2–3." in html


def test_footnotes_link_both_ways(room):
    html = room.get(ROADS).text
    assert '<sup class="note-call"><a id="fnref-1" href="#fn-1" aria-label="note 1">1</a></sup>' in html
    assert (
        '<p id="p4" class="para note"><a class="num" href="#p4" aria-label="paragraph 4">§4</a> '
        '<a class="note-label" id="fn-1" href="#fnref-1" aria-label="back to the call of note 1">[1]</a> '
        "Le péage fut supprimé"
    ) in html


def test_the_search_page_links_each_hit_to_its_paragraph(room):
    r = room.get("/search", params={"q": "le boulanger pétrit la pâte"})
    assert r.status_code == 200
    first = re.search(r'<li class="hit">(.*?)</li>', r.text, re.S).group(1)
    # led by the citation a scholar writes; the file and its § only as a detail
    assert (
        f'<a class="open" href="{BAKER}?hl=1#p1" lang="fr">bookrag, <cite>Petit traité des échanges</cite> (2026), '
        "1re partie, ch. I, « Le boulanger », § 1</a>" in first
    )
    assert (
        f'<span class="file">corpus/{BOOK}/premiere-partie/chapitre-01-le-boulanger/source.md §1</span>'
        in first
    )
    assert first.index("« Le boulanger », § 1") < first.index("source.md §1")
    assert (
        f'<a href="{BAKER}">Petit traité des échanges &gt; Première partie &gt; Chapitre I (Le boulanger)</a>'
        in first
    )
    assert re.search(r"rank 1 · .*BM25 #1", first)
    assert room.get("/search").status_code == 200  # the form alone
    in_book = room.get("/search", params={"q": "la monnaie", "book": BOOK}).text
    assert '<option value="traite-des-echanges" selected>' in in_book


def test_the_search_page_cites_a_note_as_a_note(room):
    """A footnote's hit says so in its citation (rag.paragraphs' kind and note), before its §."""
    r = room.get("/search", params={"q": "le péage fut supprimé l'année suivante"})
    hits = re.findall(r'<a class="open" href="[^"]*" lang="fr">(.*?)</a>', r.text)
    assert (
        "bookrag, <cite>Petit traité des échanges</cite> (2026), 1re partie, ch. II, « Les routes », note 1, § 4"
        in hits
    )


def test_the_search_page_takes_the_authors_wordings(room):
    """Two optional wordings beside the question (rag.search_phrasings): each hit says which found it;
    a wording that repeats the question is one sentence, status 400."""
    r = room.get(
        "/search",
        params=[
            ("q", "Qui paie l'entretien des chemins ?"),
            ("also", "péage pont routes"),
            ("also", "Le péage du pont paie la route."),
        ],
    )
    assert r.status_code == 200
    assert re.search(r"found by (the question|wording [12]) #\d+", r.text)
    assert 'value="péage pont routes"' in r.text  # the form keeps what was sent
    bad = room.get("/search", params=[("q", "pain"), ("also", "PAIN")])
    assert bad.status_code == 400 and "phrasing 1 repeats the query: &#34;PAIN&#34;" in bad.text


@pytest.mark.parametrize(
    "path, status, sentence",
    [
        ("/books/nope", 404, "no book 'nope' in the library; see the list of books at /"),
        (
            f"/books/{BOOK}/premiere-partie/chapitre-09",
            404,
            f"no chapter or part 'premiere-partie/chapitre-09' in Petit traité des échanges; its table of contents is at /books/{BOOK}",
        ),
        (
            f"/books/{BOOK}/premiere-partie/%2E%2E/%2E%2E/etc",
            404,
            f"'/books/{BOOK}/premiere-partie/../../etc' is not a page of the reading room: its pages are "
            "/books/<book>/<part>/<chapter>, without '..', '.' or empty parts",
        ),
        (
            f"/books/{BOOK}/%2Fetc%2Fpasswd",
            404,
            f"'/books/{BOOK}//etc/passwd' is not a page of the reading room: its pages are "
            "/books/<book>/<part>/<chapter>, without '..', '.' or empty parts",
        ),
        ("/books/%2Fetc%2Fpasswd", 404, "no such page in the reading room; start from the library at /"),
        ("/etc/passwd", 404, "no such page in the reading room; start from the library at /"),
        (f"{BAKER}?hl=9", 404, "Chapitre I (Le boulanger) has paragraphs §1–3; §9 is not among them"),
        (f"{BAKER}?hl=2-1", 400, "hl: '2-1' is not a forward range of paragraphs from §1"),
        (f"{BAKER}?hl=0", 400, "hl: '0' is not a forward range of paragraphs from §1"),
        (f"{BAKER}?hl=p2;drop", 400, "hl='p2;drop' is not a list of paragraph numbers like 4-7,9"),
        (f"{BAKER}?hl=1-999999", 400, "hl asks for more than 200 paragraphs; cite fewer"),
        ("/search?q=", 400, "the query is empty: give at least one word to search for"),
        ("/search?q=%00soleil", 400, "the query contains a NUL character; remove it"),
        ("/search?q=" + "a" * 2001, 400, "query is 2001 characters long; the limit is 2000"),
        (
            "/search?q=pain&book=nope",
            404,
            "no book 'nope' in the library; choose one from the list or search them all",
        ),
    ],
)
def test_bad_input_is_one_sentence(room, path, status, sentence):
    r = room.get(path)
    assert (r.status_code, error_sentence(r.text)) == (status, sentence)
    assert "Traceback" not in r.text


def test_wordings_are_checked_before_anything_is_embedded(room, monkeypatch):
    """50 `also` values are one sentence and a 400, and nothing is embedded (the embedder's calls
    counted through a wrapper); the same rule as the MCP tool and the CLI (bookrag.search.check_wordings)."""
    from mcp_server import reading_room

    calls: list[int] = []
    real = reading_room.query_vectors

    def counted(model, texts):
        calls.append(len(texts))
        return real(model, texts)

    monkeypatch.setattr(reading_room, "query_vectors", counted)
    refused = {
        "at most 4 phrasings besides the query, got 50": [("also", f"mot {i}") for i in range(50)],
        "phrasing 2 is 2001 characters long; the limit is 2000": [("also", "pont"), ("also", "b" * 2001)],
        'phrasing 2 repeats phrasing 1: "Pont "': [("also", "pont"), ("also", "Pont ")],
    }
    for sentence, also in refused.items():
        r = room.get("/search", params=[("q", "pain"), *also])
        assert (r.status_code, error_sentence(r.text)) == (400, sentence.replace('"', "&#34;"))
    assert calls == []
    r = room.get("/search", params=[("q", "pain"), *[("also", f"mot {i}") for i in range(4)]])
    assert r.status_code == 200 and calls == [5]


def test_only_get(room):
    r = room.post("/search", data={"q": "pain"})
    assert (r.status_code, error_sentence(r.text)) == (
        405,
        "the reading room only answers GET requests (and POST on /verify)",
    )


def test_host_and_origin_are_checked(room):
    r = room.get("/", headers={"host": "evil.example:8765"})
    assert (r.status_code, r.text) == (421, "Invalid Host header")
    r = room.get(BAKER, headers={"origin": "http://evil.example"})
    assert (r.status_code, r.text) == (403, "Invalid Origin header")
    assert room.get("/", headers={"host": "localhost:8765"}).status_code == 200


def test_the_token_guards_the_pages_too(room_url, room_home):
    settings = dataclasses.replace(settings_for(room_home, room_url), mcp_token="s3cret")
    with client_for(settings) as client:
        r = client.get(BAKER)
        assert (r.status_code, r.text) == (401, "missing or wrong bearer token (BOOKRAG_MCP_TOKEN)\n")
        assert client.get(BAKER, headers={"authorization": "Bearer s3cret"}).status_code == 200


def test_the_stylesheet_has_a_print_part(room):
    r = room.get("/static/room.css")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/css")
    assert "@media print" in r.text


def test_the_catalogue_reads_a_book_again_after_a_load(corpus):
    """Outlines are kept between requests and read again once rag.books.loaded_at changes (every
    load stamps it); here a load is played by hand inside the test's transaction."""
    from psycopg.rows import dict_row

    from mcp_server.room_pages import Catalogue

    corpus.row_factory = dict_row  # as the MCP server's pool gives rows
    catalogue = Catalogue()
    first = catalogue.outline(corpus, BOOK)
    assert catalogue.outline(corpus, BOOK) is first  # kept
    gone = f"corpus/{BOOK}/deuxieme-partie/chapitre-02-l-impot/source.md"
    corpus.execute("DELETE FROM rag.hierarchical_content_nodes WHERE source_file = %s", (gone,))
    assert catalogue.outline(corpus, BOOK) is first  # not stamped: not read again
    corpus.execute(
        "UPDATE rag.books SET loaded_at = loaded_at + interval '1 second' WHERE book = %s", (BOOK,)
    )
    again = catalogue.outline(corpus, BOOK)
    assert {r["source_file"] for r in first} - {r["source_file"] for r in again} == {gone}


def test_a_part_summarys_anchors_follow_the_book():
    """rag.cites lists cited files by path; the page lists them in the book's order, by label."""
    from mcp_server.room_pages import _anchors

    titles = {
        "corpus/b/p/introduction/summary.md": "Introduction",
        "corpus/b/p/chapitre-01/summary.md": "Chapitre I (Un)",
    }
    cites = [{"source_file": f, "paragraphs": None} for f in sorted(titles)]
    assert [(a.label, a.url) for a in _anchors(cites, titles)] == [
        ("Introduction", "/books/b/p/introduction"),
        ("Chapitre I", "/books/b/p/chapitre-01"),
    ]


ROADS_CITE = "bookrag, *Petit traité des échanges* (2026), 1re partie, ch. II, « Les routes »"
VERIFY_ANSWER = (
    f"Le péage : « Les marchands ont aussitôt augmenté leurs prix du montant exact du péage » ({ROADS_CITE}, § 2).\n"
    f"Puis « Une route droite et bien entretenue vaut donc une bonne récolte » ({ROADS_CITE}, § 1).\n"
    f"Enfin « la charrette du meunier met trois heures pour traverser la colline » ({ROADS_CITE}, § 1)."
)


def test_the_verify_page_marks_each_quote_and_links_where_its_words_are(room):
    form = room.get("/verify")
    assert form.status_code == 200 and '<form class="verify" action="/verify" method="post">' in form.text
    r = room.post("/verify", data={"answer": VERIFY_ANSWER})
    assert r.status_code == 200
    verdicts = re.findall(r'<li class="quote verdict-([a-z-]+)">', r.text)
    assert verdicts == ["exact", "elsewhere", "close"]  # the note call [^1] in §2 does not count
    links = re.findall(r'<a class="open" href="([^"]+)" lang="fr">([^<]+)</a>', r.text)
    assert [href for href, _ in links] == [f"{ROADS}?hl=2#p2", f"{ROADS}?hl=3#p3", f"{ROADS}?hl=1#p1"]
    assert links[1][1].replace("&lt;", "<").endswith("« Les routes », § 3")
    assert "« trois » where the book has « deux »" in r.text
    assert "1 of 3 quotes exact." in r.text


@pytest.mark.parametrize(
    ("answer", "status", "sentence"),
    [
        ("", 400, "paste an answer to check: the text with its quotes and their citations"),
        (
            "Il dit « la perfide Albion sans fin.",
            400,
            "the answer opens a quotation with « at line 1, character 8 and never closes it; close it with » or remove it",
        ),
        (
            "Il dit « la \x07perfide Albion »",
            400,
            "the answer holds a control character (U+0007) at line 1, character 13; remove it",
        ),
    ],
)
def test_the_verify_page_refuses_in_one_sentence(room, answer, status, sentence):
    r = room.post("/verify", data={"answer": answer})
    assert (r.status_code, error_sentence(r.text)) == (status, sentence)
    assert room.get("/verify").status_code == 200  # and keeps serving
