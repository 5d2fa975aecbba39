"""Validation of `read_only_sql`: one SELECT over the corpus tables, no writes, no functions
outside an allowlist, and a plan whose memory the planner can bound. sqlglot parses the statement
(a hand-written regex check is easy to fool); the database role and a READ ONLY transaction are
the next walls, and the MCP server watches the backend's memory while the statement runs."""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

ALLOWED_TABLES = {"hierarchical_content_nodes", "books", "embedding_models", "function_versions"}
ALLOWED_FUNCTIONS = {
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "length",
    "char_length",
    "lower",
    "upper",
    "coalesce",
    "nullif",
    "round",
    "floor",
    "ceil",
    "abs",
    "greatest",
    "least",
    "string_agg",
    "array_agg",
    "substr",
    "substring",
    "left",
    "right",
    "split_part",
    "trim",
    "btrim",
    "replace",
    "position",
    "strpos",
    "concat",
    "bool_or",
    "bool_and",
    "array_length",
    "cardinality",
    "vector_dims",
    "percentile_cont",
    "stddev",
    "variance",
    "regexp_replace",
    "starts_with",
    "row_number",
    "rank",
    "dense_rank",
    "date_trunc",
    "extract",
    "to_char",
    "cast",
    "trycast",
    "if",
    "case",
    "jsonb_array_length",
    "json_array_length",
    "jsonb_typeof",
    "json_typeof",
    "exists",
    "corr",
    # the names sqlglot gives some of the above once parsed
    "group_concat",
    "str_position",
    "time_to_str",
    "timestamp_trunc",
    "logical_or",
    "logical_and",
    "array_size",
    "array",
}
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
#: and constructs: AND, OR, ->, ->>, #>, #>>, @>, <@, &&, ~, ~*, ^, EXISTS, COLLATE. Listed one by
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
        with_ = (
            parent.args.get("with_") or parent.args.get("with")
            if isinstance(parent, exp.Expression)
            else None
        )
        if isinstance(with_, exp.With):
            names |= {c.alias_or_name.lower() for c in with_.expressions}
        parent = parent.parent
    return names


def check_select(sql: str) -> str:
    """Return the statement when it is safe; raise UnsafeSQL naming what is not allowed."""
    if "\x00" in sql:
        raise UnsafeSQL("the statement contains a NUL character")
    try:
        statements = [s for s in sqlglot.parse(sql, read="postgres") if s is not None]
    except sqlglot.errors.SqlglotError as exc:
        raise UnsafeSQL(f"cannot parse the statement: {str(exc).splitlines()[0]}") from exc
    except RecursionError as exc:
        raise UnsafeSQL("the statement is nested too deeply to check; simplify it") from exc
    if len(statements) != 1:
        raise UnsafeSQL(f"exactly one statement is allowed, got {len(statements)}")
    try:
        return _check_tree(statements[0], sql)
    except RecursionError as exc:
        raise UnsafeSQL("the statement is nested too deeply to check; simplify it") from exc


def _check_tree(tree: exp.Expr, sql: str) -> str:
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
            if name in ALLOWED_FUNCTIONS or type(node).__name__.lower() in ALLOWED_FUNCTIONS:
                continue
            name = _written_name(node) or name
            raise UnsafeSQL(
                f"function {name}() is not allowed (allowed: aggregates, string and math helpers, "
                f"rag.{', rag.'.join(sorted(RAG_FUNCTIONS))})"
            )
    return sql


def builds_values(sql: str) -> bool:
    """Whether a checked statement uses an aggregate that builds one value from its input rows."""
    tree = sqlglot.parse_one(sql, read="postgres")
    return any(isinstance(n, VALUE_BUILDING) for n in tree.walk())


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
