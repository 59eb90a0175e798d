/**
 * Text ↔ token ids: the Kimi tokenizer (docs/semantics.md, "Tokenizer"; files in docs/formats.md).
 *
 * <ul>
 *   <li>{@link k3j.tokenizer.Ranks}: a {@code tiktoken.model} file, refused with {@code file:line} when malformed.</li>
 *   <li>{@link k3j.tokenizer.AddedTokens}: the 256 ids above the ranks from {@code tokenizer_config.json}.</li>
 *   <li>{@link k3j.tokenizer.SplitPattern}: Kimi's split regex and the translation of tiktoken's regex dialect.</li>
 *   <li>{@link k3j.tokenizer.Tokenizer}: encode (added tokens on or off per call) and byte-exact decode.</li>
 *   <li>{@link k3j.tokenizer.Utf8Stream}: streamed output that never splits a UTF-8 sequence.</li>
 * </ul>
 */
package k3j.tokenizer;
