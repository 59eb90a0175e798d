/**
 * Chat with the model (docs/semantics.md §8.4): XTML rendering of a conversation, JSONL history files, the
 * assistant turn parsed into thinking and response, what a person sees as it is generated, and the conversation
 * that feeds only what follows the last reply. A history or turn that breaks the rules is a {@link k3j.chat.ChatException}.
 */
package k3j.chat;
