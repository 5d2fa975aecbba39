-- 0027_level_meaning: what a level means once trees have any depth (issue 36, docs/decisions/0034-trees-of-any-depth.md)
-- depends: 0026_outline_depth

COMMENT ON TABLE rag.hierarchical_content_nodes IS
    'One row per chunk of a corpus file; all rows of one source_file form one node of a book''s summary tree '
    '(level 0 paragraphs -> 1 summaries of paragraphs -> 2 summaries of summaries -> 3 book summary; parts, chapters and '
    'their sections nest to any depth, rag.outline gives the depth). Loaded from JSONL sidecars by `bookrag load`.';
COMMENT ON COLUMN rag.hierarchical_content_nodes.level IS
    'What the node is made of, not how deep it sits: 0 source paragraph; 1 summary of a section holding paragraphs (a chapter '
    'without sections, front matter, a chapter''s section); 2 summary of a node holding summaries (a part, a chapter that has '
    'sections); 3 book summary.';
