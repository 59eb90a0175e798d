/** Unit tests of the tokenizer: rank files, pre-tokenisation, encoding and decoding against the fixtures. */
package k3j.tokenizer;
