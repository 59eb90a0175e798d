/**
 * Conversation state files ({@code --save-state}/{@code --load-state}; docs/formats.md §14): {@link k3j.state.StateFile}
 * writes and reads what incremental decoding carries, {@link k3j.state.Binding} ties it to one architecture and checkpoint.
 */
package k3j.state;
