package k3j.serve;

import java.util.List;
import k3j.api.Sampling;
import k3j.chat.Thinking;

/**
 * One checked completion or chat request.
 *
 * @param chat         whether it came as a chat (messages through the chat format)
 * @param prompt       the prompt's ids
 * @param maxTokens    ids to generate at most
 * @param sampling     how each id is drawn
 * @param logprobs     whether each generated id's logprob is returned
 * @param topLogprobs  alternatives returned with each id (0 to 20)
 * @param echo         completions: the prompt returned before the completion, with its logprobs when asked
 * @param stop         strings that end the text where they first appear (not returned)
 * @param stopAtEos    whether the end-of-sequence id ends it
 * @param stream       whether the answer streams as server-sent events
 * @param includeUsage whether a stream ends with a usage chunk
 * @param thinking     chat: the thinking channel
 */
record Job(boolean chat, int[] prompt, int maxTokens, Sampling sampling, boolean logprobs, int topLogprobs, boolean echo, List<String> stop,
           boolean stopAtEos, boolean stream, boolean includeUsage, Thinking thinking) {}
