-- rag._quote_words: a text as the words a quote is checked by (the "words, not bytes" rule, here only).
CREATE OR REPLACE FUNCTION rag._quote_words(
    p_text TEXT
) RETURNS TEXT
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
/*
Returns p_text's words, lower-case, separated by one space ('' for a text without a word). What
does not change a word is dropped here, so that a quote and the book compare word for word:
  - Unicode composition (NFC: a letter typed with a combining accent is the precomposed one);
  - case ("La protection" quotes "la protection");
  - the ligatures œ and æ (written oe, ae: the corpus has both spellings);
  - every character that is not a letter or a digit: apostrophes (' ’ ʼ), quotation marks
    (" “ ” « » ‹ › „), dashes and hyphens, punctuation, the corpus's italics markers (_…_, and
    Markdown's *…*), line breaks and any spacing;
  - end-note calls ([^2]) and the summaries' anchors ([§12–14]), markers of the corpus, not words.
Accents are part of a word ("été" is not "ete"), and so is every letter: a changed, dropped or
added word changes the result. Letters and digits are Unicode's (collation pg_c_utf8, PostgreSQL
17), whatever the database's own locale.
Cost: a few regular-expression passes over the text (about 0.1 ms for a 3 KB paragraph).
*/
    SELECT btrim(regexp_replace(
        replace(replace(lower(normalize(regexp_replace(p_text, '\[[\^§][^]]*\]', ' ', 'g'), NFC) COLLATE pg_c_utf8),
                        'œ', 'oe'), 'æ', 'ae'),
        '[^[:alnum:]]+', ' ', 'g') COLLATE pg_c_utf8);
$$;
