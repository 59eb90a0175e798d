/**
 * k3j from Java: open a model under a memory plan ({@link k3j.api.Engine}, {@link k3j.api.Plan}), generate
 * ({@link k3j.api.Settings}, {@link k3j.api.TokenListener}, {@link k3j.api.Generated}) or chat
 * ({@link k3j.api.Chat}), save and load the incremental state ({@link k3j.api.State}), and judge a model or
 * another engine's candidate dump against its reference ({@link k3j.api.Conform}, {@link k3j.api.ConformReport}).
 * The {@code k3} command is a shell over this package: what it prints is what these calls return.
 */
package k3j.api;
