package k3j.probe;

import k3j.provider.ProviderGrade;
import k3j.provider.ProviderResponse;

/**
 * One answer of the server: the request it answered and its completion as ids with their logprobs.
 *
 * @param request  the request's name (what every message says)
 * @param form     the form asked
 * @param prompt   the prompt ids the answer follows (for chat: the message in the model's chat template)
 * @param response the response as read (strictly: {@link ProviderResponse})
 * @param ids      its tokens as the model's ids, with the logprobs the server gave
 */
public record Answer(String request, Form form, int[] prompt, ProviderResponse response, ProviderGrade.Ids ids) {
    /** {@return how many completion tokens it holds} */
    public int size() {
        return ids.size();
    }
}
