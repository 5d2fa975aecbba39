-- Statements an agent or a reader writes through read_only_sql: every one must run (test_legit_sql.py).
-- One statement per block; blocks are separated by a blank line.

SELECT level, count(*) FROM rag.hierarchical_content_nodes GROUP BY level ORDER BY level;

SELECT source_file, chunk_index FROM rag.hierarchical_content_nodes WHERE level = 0 AND book = 'traite-des-echanges' LIMIT 5;

SELECT count(*) FROM rag.hierarchical_content_nodes WHERE level = 0 OR node_type = 'summary';

SELECT count(*) FROM rag.hierarchical_content_nodes WHERE NOT (level = 0);

SELECT count(*) FROM rag.hierarchical_content_nodes WHERE level IN (1, 2, 3) AND book IS NOT NULL;

SELECT count(*) FROM rag.hierarchical_content_nodes WHERE level BETWEEN 1 AND 2;

SELECT source_file FROM rag.hierarchical_content_nodes WHERE content LIKE '%monnaie%' AND level = 0 LIMIT 3;

SELECT source_file, paragraph FROM rag.hierarchical_content_nodes WHERE content ILIKE '%impôt%' ORDER BY node_order, chunk_index LIMIT 10;

SELECT heading_path FROM rag.hierarchical_content_nodes WHERE heading_path NOT LIKE '%(résumé)' AND level = 0 GROUP BY heading_path;

SELECT CASE WHEN level = 0 THEN 'paragraph' WHEN level = 1 THEN 'chapter summary' ELSE 'higher summary' END AS kind, count(*) FROM rag.hierarchical_content_nodes GROUP BY 1 ORDER BY 2 DESC;

SELECT book, sum(content_token_count) AS tokens FROM rag.hierarchical_content_nodes GROUP BY book HAVING sum(content_token_count) > 0;

SELECT source_file, sum(content_token_count) AS tokens FROM rag.hierarchical_content_nodes WHERE level = 0 GROUP BY source_file ORDER BY tokens DESC LIMIT 5;

SELECT source_file, count(*) AS chunks FROM rag.hierarchical_content_nodes GROUP BY source_file HAVING count(*) > 1 ORDER BY chunks DESC, source_file;

SELECT avg(content_token_count)::int, min(content_token_count), max(content_token_count) FROM rag.hierarchical_content_nodes WHERE level = 0;

SELECT round(avg(length(content)), 1) AS mean_chars, round(stddev(length(content)), 1) AS sd FROM rag.hierarchical_content_nodes WHERE level = 0;

SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY content_token_count) AS median_tokens FROM rag.hierarchical_content_nodes WHERE level = 0;

SELECT s.source_file, s.heading_path, p.heading_path AS parent FROM rag.hierarchical_content_nodes s JOIN rag.hierarchical_content_nodes p ON p.source_file = s.parent_source_file AND p.chunk_index = 0 WHERE s.chunk_index = 0 AND s.level = 1;

SELECT c.source_file, count(*) AS paragraphs FROM rag.hierarchical_content_nodes c JOIN rag.hierarchical_content_nodes s ON s.source_file = c.parent_source_file AND s.chunk_index = 0 WHERE c.level = 0 GROUP BY c.source_file ORDER BY paragraphs DESC LIMIT 10;

SELECT b.title, b.author, b.year, count(n.id) AS rows FROM rag.books b LEFT JOIN rag.hierarchical_content_nodes n ON n.book = b.book GROUP BY b.title, b.author, b.year;

SELECT n.book, m.dimension FROM rag.hierarchical_content_nodes n JOIN rag.embedding_models m ON m.model = n.embedding_model GROUP BY n.book, m.dimension;

SELECT b.book, b.title FROM rag.books b WHERE EXISTS (SELECT 1 FROM rag.hierarchical_content_nodes n WHERE n.book = b.book AND n.level = 3);

SELECT b.book FROM rag.books b WHERE b.book NOT IN (SELECT DISTINCT book FROM rag.hierarchical_content_nodes WHERE level = 2);

WITH sizes AS (SELECT source_file, sum(content_token_count) AS tokens FROM rag.hierarchical_content_nodes GROUP BY source_file) SELECT count(*), max(tokens) FROM sizes;

WITH chapters AS (SELECT DISTINCT parent_source_file AS summary FROM rag.hierarchical_content_nodes WHERE level = 0), titled AS (SELECT c.summary, n.heading_path FROM chapters c JOIN rag.hierarchical_content_nodes n ON n.source_file = c.summary AND n.chunk_index = 0) SELECT * FROM titled ORDER BY heading_path;

WITH p AS (SELECT source_file, paragraph, content FROM rag.hierarchical_content_nodes WHERE level = 0) SELECT source_file, max(paragraph) FROM p GROUP BY source_file;

SELECT source_file, paragraph, row_number() OVER (PARTITION BY source_file ORDER BY chunk_index) AS n FROM rag.hierarchical_content_nodes WHERE level = 0 ORDER BY source_file, n LIMIT 20;

SELECT source_file, content_token_count, rank() OVER (ORDER BY content_token_count DESC) FROM rag.hierarchical_content_nodes WHERE level = 0 LIMIT 5;

SELECT source_file, sum(content_token_count) OVER (PARTITION BY source_file ORDER BY chunk_index) AS running FROM rag.hierarchical_content_nodes WHERE level = 0 LIMIT 10;

SELECT level, dense_rank() OVER (ORDER BY level) FROM rag.hierarchical_content_nodes GROUP BY level;

SELECT heading_path, content FROM rag.hierarchical_content_nodes WHERE level = 3 ORDER BY chunk_index;

SELECT DISTINCT split_part(heading_path, ' > ', 2) AS part FROM rag.hierarchical_content_nodes WHERE level >= 1 ORDER BY 1;

SELECT left(content, 80) AS opening, length(content) FROM rag.hierarchical_content_nodes WHERE level = 1 AND chunk_index = 0;

SELECT lower(heading_path), upper(book) FROM rag.hierarchical_content_nodes WHERE chunk_index = 0 AND level = 2;

SELECT substring(content from 1 for 40), substr(content, 1, 10), right(content, 10) FROM rag.hierarchical_content_nodes WHERE level = 1 LIMIT 3;

SELECT trim(both ' ' from heading_path), btrim(book), replace(heading_path, ' > ', ' / ') FROM rag.hierarchical_content_nodes WHERE chunk_index = 0 LIMIT 5;

SELECT strpos(content, 'valeur') AS at, position('valeur' in content) FROM rag.hierarchical_content_nodes WHERE content ILIKE '%valeur%' LIMIT 3;

SELECT regexp_replace(heading_path, '\s+\(résumé\)$', '') AS heading FROM rag.hierarchical_content_nodes WHERE node_type = 'summary' AND chunk_index = 0;

SELECT concat(book, ':', source_file, '#', chunk_index) FROM rag.hierarchical_content_nodes WHERE level = 0 LIMIT 3;

SELECT book || ' — ' || heading_path AS label FROM rag.hierarchical_content_nodes WHERE chunk_index = 0 AND level = 1;

SELECT coalesce(parent_source_file, '(root)'), nullif(embedding_model, '') FROM rag.hierarchical_content_nodes WHERE chunk_index = 0;

SELECT greatest(content_token_count, 10), least(content_token_count, 100), abs(content_token_count - 50), floor(content_token_count / 3.0), ceil(content_token_count / 3.0) FROM rag.hierarchical_content_nodes LIMIT 3;

SELECT starts_with(source_file, 'corpus/'), char_length(content) FROM rag.hierarchical_content_nodes LIMIT 2;

SELECT book, string_agg(DISTINCT split_part(heading_path, ' > ', 2), ' | ') FROM rag.hierarchical_content_nodes WHERE level = 1 GROUP BY book;

SELECT source_file, array_agg(paragraph ORDER BY paragraph) FROM rag.hierarchical_content_nodes WHERE level = 0 GROUP BY source_file LIMIT 5;

SELECT book, string_agg(left(content, 100), ' ' ORDER BY node_order, chunk_index) FROM rag.hierarchical_content_nodes WHERE level = 1 GROUP BY book;

SELECT bool_or(embedding IS NULL) AS some_unembedded, bool_and(content <> '') FROM rag.hierarchical_content_nodes;

SELECT embedding_model, vector_dims(embedding), count(*) FROM rag.hierarchical_content_nodes WHERE embedding IS NOT NULL GROUP BY 1, 2;

SELECT count(*) FILTER (WHERE level = 0) AS paragraphs, count(*) FILTER (WHERE level > 0) AS summaries FROM rag.hierarchical_content_nodes;

SELECT cast(level AS text), level::text || 'x' FROM rag.books b JOIN rag.hierarchical_content_nodes n ON n.book = b.book LIMIT 2;

SELECT date_trunc('day', loaded_at), to_char(loaded_at, 'YYYY-MM-DD'), extract(year from loaded_at) FROM rag.books;

SELECT name, left(sha256, 12), migration FROM rag.function_versions ORDER BY name;

SELECT model, dimension, index_name FROM rag.embedding_models;

SELECT * FROM rag.list_books();

SELECT book, title, nodes, chunks, tokens FROM rag.list_books() ORDER BY book;

SELECT source_file, level, tokens FROM rag.outline('traite-des-echanges') WHERE level <= 1 ORDER BY node_order;

SELECT count(*), sum(tokens) FROM rag.outline(p_book => 'traite-des-echanges');

SELECT rank, heading_path, paragraph FROM rag.search('monnaie', NULL, 'bm25', 5);

SELECT rank, source_file FROM rag.search(p_query => 'impôt', p_query_embedding => NULL, p_mode => 'bm25', p_k => 3, p_levels => ARRAY[0]);

SELECT h.rank, n.heading_path FROM rag.search('échange', NULL, 'bm25', 5) h JOIN rag.hierarchical_content_nodes n ON n.id = h.id ORDER BY h.rank;

SELECT s.source_file, s.paragraph FROM rag.search('valeur', NULL, 'bm25', 10, p_book => 'traite-des-echanges') s WHERE s.level = 0;

SELECT g.source_file, g.chunk_index FROM rag.get_node((SELECT source_file FROM rag.hierarchical_content_nodes WHERE level = 1 LIMIT 1)) g;

SELECT count(*) FROM rag.get_children((SELECT source_file FROM rag.hierarchical_content_nodes WHERE level = 2 LIMIT 1), 2000);

SELECT p.heading_path FROM rag.get_parent((SELECT source_file FROM rag.hierarchical_content_nodes WHERE level = 0 LIMIT 1)) p;

SELECT source_file, rag.cites(source_file, chunk_index) -> 0 ->> 'source_file' AS first_cited FROM rag.hierarchical_content_nodes WHERE level = 1 AND chunk_index = 0;

SELECT source_file, json_array_length(rag.cites(source_file, chunk_index)) AS anchors FROM rag.hierarchical_content_nodes WHERE level = 1;

SELECT count(*) FROM rag.hierarchical_content_nodes WHERE rag.cites(source_file, chunk_index)::jsonb @> '[{"paragraphs": [1]}]'::jsonb;

SELECT level FROM rag.hierarchical_content_nodes UNION SELECT 9 ORDER BY 1;

SELECT source_file FROM rag.hierarchical_content_nodes WHERE level = 0 EXCEPT SELECT source_file FROM rag.hierarchical_content_nodes WHERE content ILIKE '%monnaie%';

SELECT n.source_file FROM rag.hierarchical_content_nodes n WHERE n.content_token_count > (SELECT avg(content_token_count) FROM rag.hierarchical_content_nodes WHERE level = 0) AND n.level = 0 LIMIT 5;

SELECT source_file, chunk_index FROM rag.hierarchical_content_nodes ORDER BY content_token_count DESC NULLS LAST, source_file LIMIT 3 OFFSET 1;

-- Families an analyst who had not seen this list wrote and the guard refused (issue 43): window
-- functions, date and time, hashing, text search, arrays, JSON builders of bounded size, one argument.

SELECT source_file, paragraph, lag(content_token_count) OVER w AS previous, lead(content_token_count) OVER w AS next FROM rag.hierarchical_content_nodes WHERE level = 0 WINDOW w AS (PARTITION BY source_file ORDER BY chunk_index) ORDER BY source_file, paragraph LIMIT 20;

SELECT source_file, content_token_count, ntile(4) OVER (ORDER BY content_token_count) AS quartile FROM rag.hierarchical_content_nodes WHERE level = 0;

SELECT DISTINCT source_file, first_value(paragraph) OVER w AS first_paragraph, last_value(paragraph) OVER w AS last_paragraph FROM rag.hierarchical_content_nodes WHERE level = 0 WINDOW w AS (PARTITION BY source_file ORDER BY paragraph ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING);

SELECT source_file, nth_value(paragraph, 2) OVER (PARTITION BY source_file ORDER BY paragraph) AS second, percent_rank() OVER (ORDER BY content_token_count) AS pr, cume_dist() OVER (ORDER BY content_token_count) AS cd FROM rag.hierarchical_content_nodes WHERE level = 0 LIMIT 10;

SELECT book, now() - loaded_at AS since_load, age(now(), loaded_at) AS age, date_part('year', loaded_at) AS year, current_date - loaded_at::date AS days FROM rag.books;

SELECT book, extract(epoch FROM now() - loaded_at)::bigint AS seconds_since_load, to_char(loaded_at, 'YYYY-MM-DD') FROM rag.books WHERE loaded_at < now() + interval '1 day';

SELECT source_file, md5(content) AS digest FROM rag.hierarchical_content_nodes WHERE level = 0 ORDER BY source_file, chunk_index LIMIT 5;

SELECT md5(string_agg(content, '' ORDER BY source_file, chunk_index)) AS corpus_digest, encode(sha256(convert_to(min(content), 'UTF8')), 'hex') AS first FROM rag.hierarchical_content_nodes;

SELECT book, unnest(string_to_array(book, '-')) AS word FROM rag.books;

SELECT w AS word, count(*) FROM rag.hierarchical_content_nodes, unnest(regexp_split_to_array(lower(content), '\W+')) AS w WHERE level = 0 AND length(w) > 6 GROUP BY w ORDER BY count(*) DESC, w LIMIT 10;

SELECT source_file, ts_rank(to_tsvector('french', content), plainto_tsquery('french', 'monnaie')) AS score FROM rag.hierarchical_content_nodes WHERE to_tsvector('french', content) @@ plainto_tsquery('french', 'monnaie') ORDER BY score DESC LIMIT 5;

SELECT count(*) FROM rag.hierarchical_content_nodes WHERE to_tsvector('french', content) @@ websearch_to_tsquery('french', 'impôt OR péage');

SELECT json_build_object('book', book, 'paragraphs', count(*), 'tokens', sum(content_token_count)) AS summary FROM rag.hierarchical_content_nodes WHERE level = 0 GROUP BY book;

SELECT jsonb_build_object('title', title, 'author', author, 'year', year) || jsonb_build_object('book', book) AS meta FROM rag.books;

SELECT book, jsonb_agg(level ORDER BY level) AS levels, json_agg(DISTINCT node_type) AS kinds FROM rag.hierarchical_content_nodes GROUP BY book;

SELECT rank, source_file FROM rag.search('monnaie');

SELECT initcap(book), reverse(book), lpad(paragraph::text, 4, '0') || ' ' || left(content, 40) AS line, repeat('-', 3), format('%s §%s', source_file, paragraph) FROM rag.hierarchical_content_nodes WHERE level = 0 LIMIT 5;

SELECT trunc(avg(content_token_count), 1), sqrt(variance(content_token_count)), stddev_samp(content_token_count), mode() WITHIN GROUP (ORDER BY level) FROM rag.hierarchical_content_nodes;

SELECT source_file FROM rag.hierarchical_content_nodes WHERE level = 0 ORDER BY random() LIMIT 3;

SELECT vector_dims(embedding), round(vector_norm(embedding)::numeric, 3) FROM rag.hierarchical_content_nodes WHERE embedding IS NOT NULL LIMIT 3;
