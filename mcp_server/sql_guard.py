"""Validation of `read_only_sql`: one SELECT over the corpus tables, no writes, no functions
outside an allowlist, and a plan whose memory the planner can bound. sqlglot parses the statement
(a hand-written regex check is easy to fool); the database role and a READ ONLY transaction are
the next walls, and the MCP server watches the backend's memory while the statement runs."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

ALLOWED_TABLES = {"hierarchical_content_nodes", "books", "embedding_models", "function_versions"}
ALLOWED_FUNCTIONS = {
    "count", "sum", "avg", "min", "max", "length", "char_length", "lower", "upper", "coalesce", "nullif", "round",
    "floor", "ceil", "abs", "greatest", "least", "string_agg", "array_agg", "substr", "substring", "left", "right",
    "split_part", "trim", "btrim", "replace", "position", "strpos", "concat", "bool_or", "bool_and", "array_length",
    "cardinality", "vector_dims", "percentile_cont", "stddev", "variance", "regexp_replace", "starts_with", "row_number",
    "rank", "dense_rank", "date_trunc", "extract", "to_char", "cast", "trycast", "if", "case", "jsonb_array_length",
    "json_array_length", "jsonb_typeof", "json_typeof", "exists",
    # the names sqlglot gives some of the above once parsed
    "group_concat", "str_position", "time_to_str", "timestamp_trunc", "logical_or", "logical_and", "array_size", "array",
}
RAG_FUNCTIONS = {"list_books", "outline", "get_node", "get_parent", "get_children", "search_branch", "cites"}
#: Aggregates that build one value from all their input rows: work_mem does not bound them.
VALUE_BUILDING = (exp.ArrayAgg, exp.GroupConcat, exp.Array)
#: At most this many bytes (estimated rows x width, see plan_problem) may flow into them: the
#: value is then copied several times on its way out (JSON, cells cut), hence the margin.
VALUE_BUILDING_BYTES = 16 * 1024 * 1024
#: A statement whose plan costs more is refused before it runs: it would hold a core for seconds
#: while searches wait (the corpus's own analytical statements cost under 2,000 on both books).
COST_BOUND = 2_000_000
FORBIDDEN = (exp.Insert, exp.Update, exp.Delete, exp.Create, exp.Drop, exp.Alter, exp.Command, exp.Into, exp.Lock,
             exp.Merge, exp.TruncateTable, exp.Copy, exp.Set, exp.Transaction, exp.Commit, exp.Rollback)


class UnsafeSQL(ValueError):
    """The statement is not a single read-only SELECT over the corpus."""


def _is_operator(node: exp.Expression) -> bool:
    """sqlglot models some operators as functions (AND, OR, ->, ->>, @>, ~, ^): they are written
    as operators, run built-in operator functions, and are not calls to check by name."""
    return isinstance(node, (exp.Connector, exp.Binary, exp.Unary))


def _function_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return (node.sql_name() if hasattr(node, "sql_name") else type(node).__name__).lower()


def _written_name(node: exp.Expression) -> str:
    """The function's name as PostgreSQL spells it (sqlglot renames some: version() is its
    current_version()), for messages."""
    try:
        text = node.sql(dialect="postgres")
    except Exception:  # noqa: BLE001 - a name for a message only
        return ""
    head = text.split("(", 1)[0].strip().lower()
    return head.rsplit(".", 1)[-1] if head.replace("_", "").replace(".", "").isalnum() else ""


def _ctes_in_scope(node: exp.Expression) -> set[str]:
    """Names of the CTEs visible from node: those of the WITH clauses of its ancestors only (a
    CTE defined in a subquery must not whitelist a real table of the same name outside it)."""
    names: set[str] = set()
    parent = node.parent
    while parent is not None:
        with_ = parent.args.get("with_") or parent.args.get("with") if isinstance(parent, exp.Expression) else None
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


def _check_tree(tree: exp.Expression, sql: str) -> str:
    if not isinstance(tree, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)) and not (
            isinstance(tree, exp.With) or tree.find(exp.Select) is tree):
        raise UnsafeSQL(f"only SELECT is allowed, got {tree.key.upper()}")
    for node in tree.walk():
        if isinstance(node, FORBIDDEN):
            raise UnsafeSQL(f"{node.key.upper()} is not allowed: read-only SELECT only")
        if isinstance(node, exp.With) and node.args.get("recursive"):
            raise UnsafeSQL("WITH RECURSIVE is not allowed: its size cannot be bounded before it runs; walk the "
                            "tree with rag.outline, rag.get_children or rag.get_parent")
        if isinstance(node, exp.Table):
            name, schema = node.name.lower(), (node.db or "").lower()
            if isinstance(node.this, exp.Anonymous) or isinstance(node.this, exp.Func):
                continue  # a set-returning function in FROM: checked as a function below
            if name in ALLOWED_TABLES and schema in ("rag", ""):
                continue
            if not schema and name in _ctes_in_scope(node):
                continue
            label = f"{schema + '.' if schema else ''}{name}" or node.sql(dialect="postgres")[:80]
            raise UnsafeSQL(f"table {label} is not readable here; "
                            f"use rag.{', rag.'.join(sorted(ALLOWED_TABLES))}")
        if isinstance(node, exp.Func) and not isinstance(node, (exp.Cast, exp.Case, exp.If, exp.Paren)) \
                and not _is_operator(node):
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
            raise UnsafeSQL(f"function {name}() is not allowed (allowed: aggregates, string and math helpers, "
                            f"rag.{', rag.'.join(sorted(RAG_FUNCTIONS))})")
    return sql


def builds_values(sql: str) -> bool:
    """Whether a checked statement uses an aggregate that builds one value from its input rows."""
    tree = sqlglot.parse_one(sql, read="postgres")
    return any(isinstance(n, VALUE_BUILDING) for n in tree.walk())


def _bound_rows(node: dict) -> float:
    """An upper estimate of the rows a plan node produces. The planner's estimate, except for a
    join whose condition is not a plain column = column: its selectivity is a default guess
    (0.5 % for an expression equality) that a hostile condition turns into millions of rows, so
    its bound is the product of its inputs."""
    children = node.get("Plans") or []
    rows = float(node.get("Plan Rows", 0))
    if node.get("Node Type") in ("Nested Loop", "Hash Join", "Merge Join") and len(children) >= 2:
        condition = node.get("Hash Cond") or node.get("Merge Cond") or ""
        trusted = condition and not node.get("Join Filter") and _plain_equalities(condition)
        if not trusted:
            outer, inner = (_bound_rows(c) for c in children[:2])
            rows = max(rows, outer * inner)
    return rows


def _plain_equalities(condition: str) -> bool:
    """'((a.x = b.y) AND (a.z = b.w))' with column references only."""
    import re

    parts = re.split(r"\)\s+AND\s+\(", condition.strip("()"))
    return all(re.fullmatch(r"\(?[\w.\"]+\s*=\s*[\w.\"]+\)?", p.strip()) for p in parts)


def plan_problem(plan: dict, value_building: bool) -> str | None:
    """Why a plan (EXPLAIN (FORMAT JSON)'s "Plan") may not run, or None: a total cost over
    COST_BOUND (the planner's units; a LIMIT lowers it), or, with a value-building aggregate,
    an aggregating node's input over VALUE_BUILDING_BYTES."""
    cost = float(plan.get("Total Cost", 0))
    if cost > COST_BOUND:
        return (f"the planner estimates a cost of {cost:,.0f} (bound {COST_BOUND:,}, about the work of reading "
                "two million rows); add a WHERE or a LIMIT, or join on columns")
    if not value_building:
        return None
    stack = [plan]
    while stack:
        node = stack.pop()
        children = node.get("Plans") or []
        stack.extend(children)
        # what an aggregate reads, and what a sub-select returns (ARRAY(SELECT …) collects it)
        inputs = children if node.get("Node Type") in ("Aggregate", "WindowAgg") else []
        for child in inputs + ([node] if node.get("Subplan Name") else []):
            size = _bound_rows(child) * max(int(child.get("Plan Width", 0)), 1)
            if size > VALUE_BUILDING_BYTES:
                return (f"its array_agg/string_agg/ARRAY() would read about {_human(size)} "
                        f"({_human_rows(_bound_rows(child))} rows; bound {_human(VALUE_BUILDING_BYTES)}); "
                        "narrow it with a WHERE, join on columns, or aggregate shorter values (left(content, 200))")
    return None


def _human(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:,.0f} {unit}"
        n /= 1024
    return f"{n:,.0f} TB"


def _human_rows(n: float) -> str:
    return f"{n:,.0f}"
