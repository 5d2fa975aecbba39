"""Validation of `read_only_sql`: one SELECT over the corpus tables, no writes, no functions
outside an allowlist, a bound on what each expression can build, and a plan whose memory the
planner can bound. sqlglot parses the statement (a hand-written regex check is easy to fool); the
database role and a READ ONLY transaction are the next walls, and the MCP server watches the
backend's memory while the statement runs (watchdog.py). Decision 39 gives the budget rule.

Every input ends in a value or in UnsafeSQL, whose message is one sentence: sqlglot's own
exceptions (a parser bug on `SELECT {:}` is an AttributeError) become a refusal here."""

from __future__ import annotations

import re
from functools import cache

import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres

from mcp_server.watchdog import MEMORY_CAP_BYTES

ALLOWED_TABLES = {
    "hierarchical_content_nodes",
    "paragraphs",
    "books",
    "embedding_models",
    "function_versions",
}
#: The statement's length bound (the tool's own argument bound): beyond it nothing is parsed.
MAX_STATEMENT_CHARS = 5000
#: Words, numbers and symbols, at most (counted by a regular expression before sqlglot reads it):
#: sqlglot, pure Python, takes about 10 ms per 1,000 and far more on a loaded machine, so a
#: 5,000-character statement of one-character tokens took over 100 ms to refuse. The legitimate
#: corpus's longest statement has 73.
MAX_TOKENS = 500
_TOKEN = re.compile(r"\w+|[^\w\s]")
#: Parentheses open at once, at most: deeper, the statement is refused before sqlglot recurses
#: through it (2,000 levels took it 45 ms to give up on; the legitimate corpus nests 4).
MAX_NESTING = 64

#: The functions a statement may call, as PostgreSQL spells them: aggregates and window
#: functions, string, math, date/time, hashing, text search, JSON and array helpers, pgvector's
#: distances. None writes, sleeps, locks, reads files or settings, or builds a value from a number
#: alone (repeat and lpad/rpad take a literal length, see the budget below). sqlglot renames many
#: of them once parsed; ALLOWED_CLASSES is derived from these names by parsing a call to each.
ALLOWED_NAMES = frozenset(
    """
    count sum avg min max string_agg array_agg json_agg jsonb_agg json_object_agg jsonb_object_agg
    bool_or bool_and every bit_and bit_or stddev stddev_samp stddev_pop variance var_samp var_pop
    corr covar_pop covar_samp regr_slope regr_intercept regr_r2 regr_count percentile_cont
    percentile_disc mode
    row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
    length char_length character_length octet_length bit_length lower upper initcap left right substr
    substring split_part trim btrim ltrim rtrim replace regexp_replace position strpos starts_with
    concat concat_ws format lpad rpad repeat reverse translate md5 sha224 sha256 sha384 sha512 encode
    regexp_match regexp_matches regexp_count regexp_substr regexp_split_to_array
    regexp_split_to_table string_to_array string_to_table array_to_string to_hex ascii normalize
    round floor ceil ceiling abs greatest least trunc sign sqrt cbrt power pow mod ln log log10 exp div
    width_bucket pi degrees radians scale random
    now current_date current_timestamp localtimestamp current_time localtime clock_timestamp
    statement_timestamp transaction_timestamp date_trunc date_part extract age to_char to_date
    to_timestamp to_number make_date make_interval make_timestamp make_timestamptz justify_days
    justify_hours justify_interval date_bin isfinite
    json_build_object jsonb_build_object json_build_array jsonb_build_array to_json to_jsonb
    row_to_json array_to_json json_array_length jsonb_array_length jsonb_typeof json_typeof
    jsonb_array_elements jsonb_array_elements_text json_array_elements json_array_elements_text
    jsonb_each jsonb_each_text json_each json_each_text jsonb_object_keys json_object_keys
    jsonb_extract_path jsonb_extract_path_text json_extract_path json_extract_path_text
    jsonb_strip_nulls
    array_length cardinality array_position array_positions array_remove array_append array_prepend
    array_cat array_upper array_lower array_ndims array_dims unnest
    to_tsvector to_tsquery plainto_tsquery phraseto_tsquery websearch_to_tsquery ts_rank ts_rank_cd
    numnode setweight strip tsvector_to_array
    vector_dims vector_norm l2_distance cosine_distance inner_product
    coalesce nullif num_nonnulls num_nulls convert_to convert_from
    """.split()
)
RAG_FUNCTIONS = {"list_books", "outline", "get_node", "get_parent", "get_children", "search", "cites"}
#: Aggregates that build one value from all their input rows: work_mem does not bound them.
VALUE_BUILDING = (exp.ArrayAgg, exp.GroupConcat, exp.Array)
#: At most this many bytes (estimated rows x width, see plan_problem) may flow into them: the
#: value is then copied several times on its way out (JSON, cells cut), hence the margin.
VALUE_BUILDING_BYTES = 16 * 1024 * 1024
#: A statement whose plan costs more is refused before it runs: it would hold a core for seconds
#: while searches wait (the corpus's own analytical statements cost under 2,000 on both books).
COST_BOUND = 2_000_000
FORBIDDEN = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.Command,
    exp.Into,
    exp.Lock,
    exp.Merge,
    exp.TruncateTable,
    exp.Copy,
    exp.Set,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
)


class UnsafeSQL(ValueError):
    """The statement is not a single read-only SELECT over the corpus."""


#: What sqlglot models as functions but PostgreSQL writes (or also writes) as built-in operators
#: and constructs: AND, OR, ->, ->>, #>, #>>, @>, <@, &&, ~, ~*, ^, @@, EXISTS, COLLATE. Listed one by
#: one: other classes of the same shape (xor(), array_contains()…) are calls to check by name.
OPERATORS = (
    exp.And,
    exp.Or,
    exp.JSONExtract,
    exp.JSONExtractScalar,
    exp.JSONBExtract,
    exp.JSONBExtractScalar,
    exp.JSONBContains,
    exp.ArrayContainsAll,
    exp.ArrayContainedBy,
    exp.ArrayOverlaps,
    exp.RegexpLike,
    exp.RegexpILike,
    exp.Pow,
    exp.Exists,
    exp.Collate,
    exp.MatchAgainst,
)
#: Functions whose result can be many times their input: their replacement must be a literal of at
#: most REPLACEMENT_CHARS characters, and at most REPLACE_DEPTH of them may nest (each level can
#: multiply a value's length; planning folds constant ones before anything runs).
REPLACING = (exp.RegexpReplace,)
REPLACING_NAMES = ("replace", "regexp_replace")
REPLACEMENT_CHARS = 64
REPLACE_DEPTH = 2


def _is_operator(node: exp.Expr) -> bool:
    return isinstance(node, OPERATORS)


def _replacing(node: exp.Expr) -> bool:
    return isinstance(node, REPLACING) or (
        isinstance(node, exp.Func) and _function_name(node) in REPLACING_NAMES
    )


def _check_replacing(node: exp.Expr) -> None:
    """A replace()/regexp_replace() call's replacement and nesting (see REPLACING)."""
    args = [a for a in node.iter_expressions()]
    replacement = (
        node.args.get("replacement")
        if isinstance(node, exp.RegexpReplace)
        else (args[2] if len(args) > 2 else None)
    )
    name = _written_name(node) or "replace"
    if replacement is None or not (isinstance(replacement, exp.Literal) and replacement.is_string):
        raise UnsafeSQL(f"{name}(): the replacement must be a string literal")
    if len(replacement.this) > REPLACEMENT_CHARS:
        raise UnsafeSQL(
            f"{name}(): the replacement may be at most {REPLACEMENT_CHARS} characters, got {len(replacement.this)}"
        )
    depth, parent = 1, node.parent
    while parent is not None:
        depth += _replacing(parent)
        parent = parent.parent
    if depth > REPLACE_DEPTH:
        raise UnsafeSQL(f"{name}(): at most {REPLACE_DEPTH} replace()/regexp_replace() calls may nest")


def _function_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return (node.sql_name() if hasattr(node, "sql_name") else type(node).__name__).lower()


def _written_name(node: exp.Expr) -> str:
    """The function's name as PostgreSQL spells it (sqlglot renames some: version() is its
    current_version()), for messages."""
    try:
        text = node.sql(dialect="postgres")
    except Exception:  # noqa: BLE001 - a name for a message only
        return ""
    head = text.split("(", 1)[0].strip().lower()
    return head.rsplit(".", 1)[-1] if head.replace("_", "").replace(".", "").isalnum() else ""


def _ctes_in_scope(node: exp.Expr) -> set[str]:
    """Names of the CTEs visible from node: those of the WITH clauses of its ancestors only (a
    CTE defined in a subquery must not whitelist a real table of the same name outside it)."""
    names: set[str] = set()
    parent = node.parent
    while parent is not None:
        with_ = parent.args.get("with_") or parent.args.get("with") if isinstance(parent, exp.Expr) else None
        if isinstance(with_, exp.With):
            names |= {c.alias_or_name.lower() for c in with_.expressions}
        parent = parent.parent
    return names


class _Dialect(Postgres):
    """PostgreSQL as sqlglot reads it, without the functions of other dialects that shadow
    PostgreSQL's calls of the same name: SEARCH (BigQuery's search(a, b)) made `rag.search('x')`
    with one argument a parse error."""

    class Parser(Postgres.Parser):  # type: ignore[misc,valid-type]
        FUNCTIONS = {k: v for k, v in Postgres.Parser.FUNCTIONS.items() if k not in ("SEARCH",)}


def parse(sql: str) -> list[exp.Expr]:
    """The statements of sql as the guard reads them (sqlglot's exceptions pass through)."""
    return [s for s in sqlglot.parse(sql, read=_Dialect) if s is not None]


@cache
def allowed_classes() -> frozenset[str]:
    """sqlglot's class names for the calls of ALLOWED_NAMES (e.g. strpos is StrPosition), found by
    parsing a call to each with 0 to 4 arguments; Anonymous is not among them (an unknown call
    is checked by its name). test_sql_guard.py walks every function sqlglot knows and lists the
    other PostgreSQL names that reach these classes."""
    found = {"Array", "Window", "Unnest"}  # ARRAY[...], OVER () and unnest() in FROM: constructs
    for name in ALLOWED_NAMES:
        for args in ("", "a", "a, b", "a, b, c", "a, b, c, d"):
            try:
                (tree,) = parse(f"SELECT {name}({args})")
            except Exception:  # noqa: BLE001 - an arity this name does not take
                continue
            node = tree.expressions[0] if isinstance(tree, exp.Select) and tree.expressions else None
            if isinstance(node, exp.Func) and not isinstance(node, exp.Anonymous):
                found.add(type(node).__name__)
    return frozenset(found)


#: Computed once, when the module loads (about a second), so that no call pays for it.
ALLOWED_CLASSES = allowed_classes()


def _allowed_call(node: exp.Func) -> bool:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower() in ALLOWED_NAMES
    return type(node).__name__ in ALLOWED_CLASSES


def check_select(sql: str) -> str:
    """Return the statement when it is safe; raise UnsafeSQL (one sentence) naming what is not
    allowed. Nothing else escapes: whatever sqlglot raises on a malformed input is a refusal."""
    if len(sql) > MAX_STATEMENT_CHARS:
        raise UnsafeSQL(
            f"the statement is {len(sql):,} characters long; the limit is {MAX_STATEMENT_CHARS:,}"
        )
    if "\x00" in sql:
        raise UnsafeSQL("the statement contains a NUL character")
    if _depth(sql) > MAX_NESTING:
        raise UnsafeSQL("the statement is nested too deeply to check; simplify it")
    tokens = sum(1 for _ in _TOKEN.finditer(sql))
    if tokens > MAX_TOKENS:
        raise UnsafeSQL(f"the statement has {tokens:,} words and symbols; the limit is {MAX_TOKENS:,}")
    try:
        statements = parse(sql)
    except sqlglot.errors.SqlglotError as exc:
        raise UnsafeSQL(f"cannot parse the statement: {_parse_problem(exc)}") from exc
    except RecursionError as exc:
        raise UnsafeSQL("the statement is nested too deeply to check; simplify it") from exc
    except Exception as exc:  # noqa: BLE001 - sqlglot's own bugs (SELECT {:}): refuse, in one sentence
        raise UnsafeSQL("cannot parse the statement; check its syntax") from exc
    if len(statements) != 1:
        raise UnsafeSQL(f"exactly one statement is allowed, got {len(statements)}")
    try:
        _check_tree(statements[0])
        check_budget(statements[0])
    except UnsafeSQL:
        raise
    except RecursionError as exc:
        raise UnsafeSQL("the statement is nested too deeply to check; simplify it") from exc
    except Exception as exc:  # noqa: BLE001 - a tree the checks cannot read is refused, never run
        raise UnsafeSQL("cannot check the statement; simplify it") from exc
    return sql


def _depth(sql: str) -> int:
    """The most parentheses open at once in the text (quotes not told apart: a parenthesis in a
    string literal counts too, which can only refuse, never let through)."""
    depth = deepest = 0
    for ch in sql:
        if ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")" and depth:
            depth -= 1
    return deepest


def _parse_problem(exc: sqlglot.errors.SqlglotError) -> str:
    """sqlglot's complaint as a clause of one sentence: where, and what (its own message is
    several sentences, names internal classes and tokens, and carries ANSI codes)."""
    if isinstance(exc, sqlglot.errors.TokenError):
        return "a quote, dollar quote or comment is not closed"
    errors = getattr(exc, "errors", None) or []
    if not errors:
        return "syntax error"
    first = errors[0]
    what = str(first.get("description") or "syntax error")
    what = re.sub(r"<Token token_type: [^,]*, text: ([^,]*),[^>]*>", r"'\1'", what)
    what = re.sub(r"<class '[\w.]*\.(\w+)'>", r"\1", what)
    what = what.replace("'SENTINEL'", "the end").replace(". ", "; ").rstrip(". ")
    near = str(first.get("highlight") or "")[:40]
    where = f"line {first.get('line', 1)}, column {first.get('col', 1)}"
    return f"{what[:1].lower()}{what[1:]} at {where}" + (f" near {near!r}" if near else "")


def _check_tree(tree: exp.Expr) -> None:
    if not isinstance(tree, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)) and not (
        isinstance(tree, exp.With) or tree.find(exp.Select) is tree
    ):
        raise UnsafeSQL(f"only SELECT is allowed, got {tree.key.upper()}")
    for node in tree.walk():
        if isinstance(node, FORBIDDEN):
            raise UnsafeSQL(f"{node.key.upper()} is not allowed: read-only SELECT only")
        if isinstance(node, exp.With) and node.args.get("recursive"):
            raise UnsafeSQL(
                "WITH RECURSIVE is not allowed: its size cannot be bounded before it runs; walk the "
                "tree with rag.outline, rag.get_children or rag.get_parent"
            )
        if isinstance(node, exp.Table):
            name, schema = node.name.lower(), (node.db or "").lower()
            if isinstance(node.this, exp.Anonymous) or isinstance(node.this, exp.Func):
                continue  # a set-returning function in FROM: checked as a function below
            if name in ALLOWED_TABLES and schema in ("rag", ""):
                continue
            if not schema and name in _ctes_in_scope(node):
                continue
            label = f"{schema + '.' if schema else ''}{name}" or node.sql(dialect="postgres")[:80]
            raise UnsafeSQL(
                f"table {label} is not readable here; use rag.{', rag.'.join(sorted(ALLOWED_TABLES))}"
            )
        if _replacing(node):
            _check_replacing(node)
        if (
            isinstance(node, exp.Func)
            and not isinstance(node, (exp.Cast, exp.Case, exp.If, exp.Paren))
            and not _is_operator(node)
        ):
            name = _function_name(node)
            parent = node.parent
            if isinstance(parent, exp.Table):
                schema = (parent.db or "").lower()
            elif isinstance(parent, exp.Dot):
                schema = parent.this.name.lower()
            else:
                schema = ""
            if schema == "rag" and name in RAG_FUNCTIONS:
                continue
            if schema in ("", "pg_catalog") and _allowed_call(node):
                continue
            name = _written_name(node) or name
            raise UnsafeSQL(
                f"function {name}() is not allowed (allowed: aggregates, window functions, string, math, "
                f"date, hashing, text-search, JSON and array helpers, rag.{', rag.'.join(sorted(RAG_FUNCTIONS))})"
            )


# --- what each expression can build (decision 39) -------------------------------------------
#
# PostgreSQL checks for cancellation between rows, never inside one expression, and keeps every
# intermediate value of a row's expressions until the row is done: `c || c || … || c` with n
# operands allocates about n²/2 times c before anything can stop it. So the guard bounds what can
# be built, before anything runs:
#  1. every operand of an operation that builds a value counts: each side of `||`, each argument
#     of concat/concat_ws/format/json(b)_build_*/array_cat/array_append/array_prepend, each
#     element of ARRAY[...], n for repeat(x, n), the replacement's length + 1 for replace() and
#     regexp_replace(); the whole statement (subqueries and CTEs included: one level's result is the
#     next level's operand) may hold at most MAX_OPERANDS;
#  2. a value an aggregate builds from many rows (string_agg, array_agg, json(b)_agg,
#     json(b)_object_agg, ARRAY(SELECT …)) can be as large as the memory watchdog lets it grow, so
#     it may only be measured, cut, hashed or returned (MEASURING), never built into a larger value
#     or processed further; in a statement holding one, an operand that comes through a derived
#     table, a CTE or an outer query is taken to be such a value;
#  3. repeat(), lpad() and rpad() take a literal length (lpad/rpad at most MAX_PAD_CHARS).
MAX_OPERANDS = 16
MAX_PAD_CHARS = 10_000
#: What builds one value from all its input rows (work_mem does not bound them).
AGGREGATE_BUILDERS = (exp.ArrayAgg, exp.GroupConcat, exp.JSONArrayAgg, exp.JSONObjectAgg, exp.JSONBObjectAgg)
AGGREGATE_BUILDER_NAMES = frozenset({"jsonb_agg", "xmlagg"})
#: Calls whose operands all end up in their result (each counts, rule 1).
BUILDERS = (exp.Concat, exp.ConcatWs, exp.ArrayConcat, exp.ArrayAppend, exp.ArrayPrepend)
BUILDER_NAMES = frozenset(
    {"json_build_object", "jsonb_build_object", "json_build_array", "jsonb_build_array"}
)
#: What may be applied to an aggregate's large value (rule 2): its size or a part of it.
MEASURING = (
    exp.Length,
    exp.BitLength,
    exp.ArraySize,
    exp.Left,
    exp.Right,
    exp.Substring,
    exp.MD5,
    exp.Explode,
    exp.Count,
    exp.Coalesce,
)
MEASURING_NAMES = frozenset(
    {
        "octet_length",
        "cardinality",
        "array_ndims",
        "array_upper",
        "array_lower",
        "json_array_length",
        "jsonb_array_length",
    }
)


def _is_aggregate_builder(node: exp.Expr) -> bool:
    if isinstance(node, AGGREGATE_BUILDERS):
        return True
    if isinstance(node, exp.Anonymous) and str(node.name).lower() in AGGREGATE_BUILDER_NAMES:
        return True
    return isinstance(node, exp.Array) and any(
        isinstance(e, (exp.Select, exp.Subquery)) for e in node.expressions
    )


def _builder_label(node: exp.Expr) -> str:
    if isinstance(node, exp.Array):
        return "ARRAY(SELECT …)"
    return f"{_written_name(node) or _function_name(node)}()"


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _operands(node: exp.Expr) -> list[exp.Expr]:
    """The operands node builds its value from (rule 1), [] when it builds none."""
    if isinstance(node, exp.DPipe):
        return [node.this, node.expression]
    if isinstance(node, exp.Array) and not _is_aggregate_builder(node):
        return list(node.expressions)
    if isinstance(node, BUILDERS) or (
        isinstance(node, exp.Anonymous) and str(node.name).lower() in BUILDER_NAMES
    ):
        return [e for e in node.iter_expressions()]
    if isinstance(node, exp.Format):
        return [e for e in node.iter_expressions()]
    return []


def _weight(node: exp.Expr) -> int:
    """How many operands node adds to the statement's count (rule 1)."""
    if isinstance(node, exp.DPipe):  # a chain a || b || c counts its leaves once
        return sum(1 for side in (node.this, node.expression) if not isinstance(_unparen(side), exp.DPipe))
    if isinstance(node, exp.Format):
        pattern = node.this
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise UnsafeSQL("format(): the format must be a string literal")
        # '%1$s%1$s…' repeats one argument: each conversion counts
        return max(len(node.expressions), pattern.this.count("%"))
    if isinstance(node, exp.Repeat):
        times = node.args.get("times")
        if not (isinstance(times, exp.Literal) and not times.is_string):
            raise UnsafeSQL("repeat(): the count must be an integer literal")
        return max(1, int(float(times.this)))  # a negative count must not buy operands back
    if isinstance(node, exp.Pad):
        length = node.args.get("expression")
        if (
            not (isinstance(length, exp.Literal) and not length.is_string)
            or float(length.this) > MAX_PAD_CHARS
        ):
            raise UnsafeSQL(
                f"lpad()/rpad(): the length must be an integer literal of at most {MAX_PAD_CHARS:,}"
            )
        return 1
    if _replacing(node):
        args = list(node.iter_expressions())
        replacement = node.args.get("replacement") if isinstance(node, exp.RegexpReplace) else args[2]
        return len(replacement.this) + 1 if isinstance(replacement, exp.Literal) else REPLACEMENT_CHARS + 1
    return len(_operands(node))


def _sources(select: exp.Select) -> list[exp.Expr]:
    from_ = select.args.get("from_") or select.args.get("from")
    found = [from_.this] if isinstance(from_, exp.From) else []
    return found + [j.this for j in select.args.get("joins") or []]


def _base_aliases(select: exp.Select) -> tuple[set[str], bool]:
    """The names of select's FROM items that are corpus tables (rows read from disk, each value
    one stored cell), and whether every FROM item is one."""
    ctes = _ctes_in_scope(select) | {
        c.alias_or_name.lower() for c in (select.args.get("with_") or exp.With()).expressions
    }
    names, all_base = set(), True
    for source in _sources(select):
        if (
            isinstance(source, exp.Table)
            and not isinstance(source.this, exp.Func)
            and source.name.lower() in ALLOWED_TABLES
            and not (not source.db and source.name.lower() in ctes)
        ):
            names |= {source.alias_or_name.lower(), source.name.lower()}
        else:
            all_base = False
    return names, all_base


def _stored_cell(column: exp.Column) -> bool:
    """Whether column surely reads a corpus table's stored cell: it names (or, unqualified, its
    SELECT and every enclosing one read only) corpus tables; otherwise it may come from a derived
    table, a CTE or an outer query, and hold what an aggregate built there."""
    select = column.find_ancestor(exp.Select)
    if select is None:
        return False
    names, all_base = _base_aliases(select)
    if column.table:
        return column.table.lower() in names
    while select is not None:
        if not _base_aliases(select)[1]:
            return False
        select = select.find_ancestor(exp.Select)
    return all_base


def _large(node: exp.Expr, any_builder: bool) -> exp.Expr | None:
    """The aggregate (or, when the statement holds one, the column not surely a stored cell) in
    node whose value may be as large as an aggregate builds, or None (rule 2)."""
    for sub in node.walk():
        if _is_aggregate_builder(sub):
            return sub
        if any_builder and isinstance(sub, exp.Column) and not _stored_cell(sub):
            return sub
    return None


def check_budget(tree: exp.Expr) -> None:
    """Rules 1-3 above: raise UnsafeSQL when the statement can build more than they allow. The
    count comes first (one pass); the aggregates' rule walks operands only in a statement that
    holds an aggregate builder."""
    total = 0
    for node in tree.walk():
        total += _weight(node)
        if total > MAX_OPERANDS:
            raise UnsafeSQL(
                f"the statement builds values from more than {MAX_OPERANDS} operands (||, concat, format, "
                "ARRAY[], json_build_*, repeat, replace); build fewer, or measure them with length()"
            )
    if not any(_is_aggregate_builder(n) for n in tree.walk()):
        return
    for node in tree.walk():
        consumer = isinstance(node, exp.Func) and not isinstance(
            node, (exp.AggFunc, exp.Window, exp.Paren, exp.Case, exp.If, *MEASURING, *OPERATORS)
        )
        if isinstance(node, exp.Anonymous) and str(node.name).lower() in MEASURING_NAMES:
            consumer = False
        if not (consumer or _operands(node) or _weight(node)):
            continue
        for arg in node.iter_expressions():
            large = None if isinstance(arg, exp.DataType) else _large(arg, True)
            if large is None:
                continue
            if _is_aggregate_builder(large):
                what = f"{_builder_label(large)}'s result"
            else:
                what = f"{large.sql(dialect='postgres')[:60]} (it may hold an aggregate's result)"
            raise UnsafeSQL(
                f"{what} can grow to the {MEMORY_CAP_BYTES // 2**20} MB memory cap, so it may only be "
                "measured (length, cardinality), cut (left, substr), hashed (md5) or returned, not passed "
                f"to {_call_label(node)}; aggregate shorter values instead"
            )


def _call_label(node: exp.Expr) -> str:
    if isinstance(node, exp.DPipe):
        return "||"
    if isinstance(node, exp.Array):
        return "ARRAY[]"
    if isinstance(node, exp.Cast):
        return "a cast"
    return f"{_written_name(node) or _function_name(node)}()"


def builds_values(sql: str) -> bool:
    """Whether a checked statement uses an aggregate that builds one value from its input rows."""
    (tree,) = parse(sql)
    return any(isinstance(n, VALUE_BUILDING) or _is_aggregate_builder(n) for n in tree.walk())


SCANS = ("Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan")


def _bound_rows(node: dict) -> float:
    """An upper estimate of the rows a plan node produces. The planner's estimate, raised where it
    may be a guess: a join whose condition is not column = column between two tables' own columns
    (statistics exist for those; an expression's or a CTE's column has a default selectivity that a
    hostile condition turns into millions of rows) counts the product of its inputs; a trusted join
    scales its estimate by how much its inputs' bounds exceed their estimates; any other node
    produces at most what its inputs bound (a LIMIT or an aggregate produce less, never more)."""
    children = node.get("Plans") or []
    rows = float(node.get("Plan Rows", 0))
    if not children:
        return rows
    bounds = [_bound_rows(c) for c in children]
    if node.get("Node Type") in ("Nested Loop", "Hash Join", "Merge Join") and len(children) >= 2:
        condition = node.get("Hash Cond") or node.get("Merge Cond") or ""
        trusted = (
            condition
            and not node.get("Join Filter")
            and _plain_equalities(condition)
            and all(_reads_a_table(c) for c in children[:2])
        )
        if not trusted:
            return max(rows, bounds[0] * bounds[1])
        scale = 1.0
        for child, bound in zip(children[:2], bounds[:2]):
            scale *= max(1.0, bound / max(float(child.get("Plan Rows", 0)), 1.0))
        return rows * scale
    return max(
        rows,
        sum(
            b
            for c, b in zip(children, bounds)
            if c.get("Parent Relationship") != "InitPlan" and c.get("Parent Relationship") != "SubPlan"
        ),
    )


def _reads_a_table(node: dict) -> bool:
    """A table scan, directly or under the Hash (or Materialize, Sort) a join reads it through."""
    while node.get("Node Type") in ("Hash", "Materialize", "Sort", "Memoize") and node.get("Plans"):
        node = node["Plans"][0]
    return node.get("Node Type") in SCANS


def _plain_equalities(condition: str) -> bool:
    """'((a.x = b.y) AND (a.z = b.w))' with column references only."""
    parts = re.split(r"\)\s+AND\s+\(", condition.strip("()"))
    return all(re.fullmatch(r"\(?[\w.\"]+\s*=\s*[\w.\"]+\)?", p.strip()) for p in parts)


def plan_problem(plan: dict, value_building: bool) -> str | None:
    """Why a plan (EXPLAIN (FORMAT JSON)'s "Plan") may not run, or None: a total cost over
    COST_BOUND (the planner's units; a LIMIT lowers it), or, with a value-building aggregate,
    an aggregating node's input over VALUE_BUILDING_BYTES."""
    cost = float(plan.get("Total Cost", 0))
    if cost > COST_BOUND:
        return (
            f"the planner estimates a cost of {cost:,.0f} (bound {COST_BOUND:,}, about the work of reading "
            "two million rows); add a WHERE or a LIMIT, or join on columns"
        )
    if not value_building:
        return None
    nodes, stack = [], [plan]
    while stack:
        nodes.append(stack.pop())
        stack.extend(nodes[-1].get("Plans") or [])
    # a row's width: the widest any node of the plan reports (an expression's or a CTE column's
    # width is the planner's guess, often 32 bytes, whatever it carries)
    width = max(max(int(n.get("Plan Width", 0)) for n in nodes), 1)
    for node in nodes:
        children = node.get("Plans") or []
        # what an aggregate reads, and what a sub-select returns (ARRAY(SELECT …) collects it)
        inputs = children if node.get("Node Type") in ("Aggregate", "WindowAgg") else []
        for child in inputs + ([node] if node.get("Subplan Name") else []):
            size = _bound_rows(child) * width
            if size > VALUE_BUILDING_BYTES:
                return (
                    f"its array_agg/string_agg/ARRAY() would read about {_human(size)} "
                    f"({_human_rows(_bound_rows(child))} rows; bound {_human(VALUE_BUILDING_BYTES)}); "
                    "narrow it with a WHERE, join on columns, or aggregate shorter values (left(content, 200))"
                )
    return None


def _human(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:,.0f} {unit}"
        n /= 1024
    return f"{n:,.0f} TB"


def _human_rows(n: float) -> str:
    return f"{n:,.0f}"
