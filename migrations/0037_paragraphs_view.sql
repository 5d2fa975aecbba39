-- 0037_paragraphs_view: rag.paragraphs, a reader's view of the text (issue 45): every chunk with its
-- citation columns, which part of its paragraph it is, and whether the paragraph is a note; no
-- embedding column, so `SELECT *` stays readable.
-- depends: 0036_one_expand_convention

-- The one place where a chunk's part of its paragraph and a paragraph's note are computed: the MCP
-- tools (search, get_node), the CLI's citations and the reading room read them here.
-- A note is a footnote paragraph as the importers write it (`[^2]: …`, loader.importers.gutenberg):
-- its label is read on the paragraph's first chunk; it is the editor's when the paragraph ends with
-- "(Note de l'éditeur.)" (italics markers allowed), read on its last chunk, so a note split in
-- several chunks is marked on every one.
CREATE OR REPLACE VIEW rag.paragraphs AS
SELECT x.book, x.source_file, x.heading_path, x.level, x.node_type, x.paragraph, x.chunk_index,
       x.part, x.parts,
       CASE WHEN x.note IS NULL THEN x.kind
            WHEN x.last_chunk ~* '\(\s*_?\s*note\s+de\s+l[''’]\s*[ée]diteur\s*\.?\s*_?\s*\)\s*\.?\s*$' THEN 'editor_note'
            ELSE 'note' END AS kind,
       x.note, x.content, x.content_token_count AS tokens, x.parent_source_file, x.node_order
FROM (
    SELECT n.book, n.source_file, n.heading_path, n.level, n.node_type, n.paragraph, n.chunk_index,
           n.kind, n.content, n.content_token_count, n.parent_source_file, n.node_order,
           row_number() OVER w AS part,
           count(*) OVER w AS parts,
           substring(first_value(n.content) OVER w FROM '^\[\^([^]\s]+)\]:') AS note,
           last_value(n.content) OVER w AS last_chunk
    FROM rag.hierarchical_content_nodes n
    WINDOW w AS (PARTITION BY n.source_file, n.paragraph ORDER BY n.chunk_index
                 ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
) x;

COMMENT ON VIEW rag.paragraphs IS
    'The text to read, one row per chunk (no embedding): book, source_file, heading_path, level (0 the book''s paragraphs, 1-3 the project''s summaries), node_type, paragraph (§N), chunk_index, part of parts (a long paragraph split in several chunks: 1 of 2, 2 of 2), kind, note (a footnote''s label), content, tokens, parent_source_file, node_order. Filter on source_file (and paragraph): the window is computed per paragraph. E.g. SELECT paragraph, part, parts, kind, content FROM rag.paragraphs WHERE source_file = ''corpus/<book>/…/source.md'' ORDER BY chunk_index.';
COMMENT ON COLUMN rag.paragraphs.paragraph IS '1-based paragraph of source_file (§N): what citations and summary anchors name.';
COMMENT ON COLUMN rag.paragraphs.part IS 'Which chunk of its paragraph this row is (1-based, in chunk order): a long paragraph is split in several chunks that share one §N.';
COMMENT ON COLUMN rag.paragraphs.parts IS 'How many chunks the paragraph has (1: the paragraph is whole in this row).';
COMMENT ON COLUMN rag.paragraphs.kind IS '''text'' (the book''s text, the project''s summaries), ''author_summary'' (the author''s own summary of the section), ''note'' (a footnote: the author''s unless the text says otherwise), ''editor_note'' (a footnote the text marks "(Note de l''éditeur.)": not the author''s words).';
COMMENT ON COLUMN rag.paragraphs.note IS 'A footnote''s label ("2" for a paragraph that opens "[^2]:"); NULL for any other paragraph.';
COMMENT ON COLUMN rag.paragraphs.tokens IS 'Tokens of content (hierarchical_content_nodes.content_token_count).';
GRANT SELECT ON rag.paragraphs TO bookrag_reader;
