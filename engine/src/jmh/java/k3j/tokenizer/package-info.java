/** JMH benchmark of encoding text with the tokenizer. */
package k3j.tokenizer;
