package k3j.cli;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;
import k3j.chat.ChatException;
import k3j.chat.Message;
import k3j.chat.Role;
import k3j.chat.Thinking;
import k3j.chat.Xtml;
import k3j.config.ModelConfig;
import k3j.dump.LogitFile;
import k3j.io.AtomicWrite;
import k3j.io.SafeFiles;
import k3j.io.StrictJson;
import k3j.provider.ProviderGrade;
import k3j.provider.ProviderResponse;
import k3j.tokenizer.Tokenizer;
import k3j.tokenizer.TokenizerException;
import k3j.verdict.ConformException;

/**
 * {@code k3 compare-logits CANDIDATE --reference RESPONSE.json (--request REQUEST.json | --prompt-ids IDS) --model DIR}:
 * a candidate graded against a hosted API's logprobs ({@link ProviderGrade}). The ids are the prompt (REQUEST's
 * messages rendered with the model's chat template, its prompt text encoded, or its prompt ids) followed by the
 * provider's completion tokens mapped through the model's tokenizer; the candidate is logits over those ids, or k3j's
 * own teacher-forced run of them ({@code --run}).
 */
final class ProviderComparison {
    static final long MAX_REQUEST_BYTES = 64L << 20;

    /** The prompt and how it was made. */
    record Prompt(int[] ids, String how) {}

    /**
     * The request fields that leave the graded distribution as the prompt alone makes it: the prompt, the model's name,
     * the thinking effort the template renders, how many tokens and alternatives, and how they were sampled and sent.
     * Any other field (tools, suffix, logit_bias, a penalty, response_format...) changes what was asked: refused by name.
     */
    static final java.util.Set<String> REQUEST_FIELDS = java.util.Set.of("model", "messages", "prompt", "reasoning_effort", "logprobs", "top_logprobs", "max_tokens",
            "max_completion_tokens", "temperature", "top_p", "n", "seed", "stream", "stream_options", "stop", "user", "store", "metadata");

    private ProviderComparison() {}

    static int run(CompareLogitsCommand cmd, PrintWriter out, Function<String, RuntimeException> usage) throws IOException {
        if (cmd.shape == null || cmd.shape.model == null) throw usage.apply("a provider response needs --model DIR: its config, its tokenizer (or --tok) and, with --run, its weights");
        if ((cmd.request == null) == (cmd.promptIds == null)) throw usage.apply("a provider response needs the prompt: --request REQUEST.json or --prompt-ids IDS (one of them)");
        if ((cmd.file == null) == !cmd.run) throw usage.apply("name the candidate: a logit file, or --run for k3j's own teacher-forced run (one of them)");
        cmd.lossy.validateValues(cmd.spec.commandLine());
        if (cmd.position != null) throw usage.apply("--position is not for a provider response: its completion says which positions are graded");
        ModelConfig config;
        try {
            config = k3j.config.ConfigReader.read(cmd.shape.configFile());
        } catch (k3j.config.ConfigException e) {
            throw usage.apply(e.getMessage());
        }
        int v = config.vocabSize();
        Path tokDir = cmd.tok != null ? cmd.tok : cmd.shape.model;
        Tokenizer tok;
        try {
            tok = Tokenizer.load(tokDir);
        } catch (TokenizerException e) {
            throw usage.apply("the model's tokenizer: " + e.getMessage() + (cmd.tok == null ? " (--tok DIR names another folder)" : ""));
        }
        ProviderResponse response;
        ProviderGrade.Ids mapped;
        Prompt prompt;
        try {
            response = ProviderResponse.read(cmd.reference);
            mapped = ProviderGrade.ids(response, tok, v);
            prompt = cmd.request != null ? prompt(cmd.request, tok) : new Prompt(cmd.promptIds.stream().mapToInt(Integer::intValue).toArray(), "--prompt-ids");
        } catch (ProviderResponse.RefusedException e) {
            throw usage.apply("refused: " + e.getMessage());
        }
        for (int id : prompt.ids()) if (id < 0 || id >= v) throw usage.apply("refused: prompt id " + id + " is outside the model's vocabulary 0.." + (v - 1));
        int np = prompt.ids().length, n = mapped.size();
        if (np == 0) throw usage.apply("refused: the prompt is empty");
        if (response.promptTokens() >= 0 && response.promptTokens() != np) {
            throw usage.apply("refused: the provider counted " + response.promptTokens() + " prompt tokens (usage.prompt_tokens), the prompt here is " + np + " ids from "
                    + prompt.how() + ": it saw another prompt (a system prompt it adds, another chat template, a BOS): grade only what was read alike");
        }
        int[] ids = new int[np + n];
        System.arraycopy(prompt.ids(), 0, ids, 0, np);
        System.arraycopy(mapped.chosen(), 0, ids, np, n);
        float[] rows;
        String candidate;
        boolean idsChecked = true;
        if (cmd.run) {
            rows = teacherForced(cmd, ids, np, v, usage);
            candidate = "k3j's own teacher-forced run of the " + ids.length + " ids on " + cmd.shape.model;
        } else {
            LogitFile f;
            try {
                f = LogitFile.read(cmd.file, v);
                idsChecked = checkCandidateIds(cmd.file, ids, usage);
            } catch (LogitFile.LogitFileException | ConformException e) {
                throw usage.apply("refused: " + e.getMessage());
            }
            int start;
            if (f.rows() == ids.length || f.rows() == ids.length - 1) start = np - 1;   // every position (the last id's row, if there, predicts nothing graded)
            else if (f.rows() == n) start = 0;   // exactly the rows that predict the completion
            else throw usage.apply("refused: " + cmd.file + " holds " + f.rows() + " rows; the ids are " + np + " prompt + " + n + " completion = " + ids.length
                    + ": a candidate holds a row per id (" + ids.length + " or " + (ids.length - 1) + ") or one per completion token (" + n + ")");
            rows = Arrays.copyOfRange(f.values(), start * v, (start + n) * v);
            candidate = cmd.file + " (" + f.format() + ")";
        }
        ProviderGrade g = ProviderGrade.grade(rows, mapped, v, np - 1);
        LossyOptions l = cmd.lossy;
        boolean anyGiven = l.maxKl != null || l.minTop1 != null || l.maxDlogprob != null;
        ProviderGrade.Thresholds t = anyGiven ? new ProviderGrade.Thresholds(l.minTop1, l.maxDlogprob, l.maxKl)
                : new ProviderGrade.Thresholds(ProviderGrade.Thresholds.DEFAULT_MIN_TOP1, ProviderGrade.Thresholds.DEFAULT_MAX_MEAN_DLOGPROB, null);
        k3j.verdict.Verdict verdict = k3j.verdict.Invariants.decide(k3j.verdict.Invariants.Mode.LOSSY,
                List.of(g.item("logits against the provider's logprobs", rows, t, k3j.verdict.VerdictLimits.shipped())));
        boolean within = verdict.green();
        out.println("candidate             : " + candidate);
        out.println("reference             : " + cmd.reference + " (a provider's logprobs, " + response.form() + " form: " + n + " completion tokens, top-"
                + Arrays.stream(mapped.top()).mapToInt(a -> a.length).max().orElseThrow() + " alternatives)");
        out.println("prompt                : " + np + " ids from " + prompt.how() + (response.promptTokens() >= 0 ? ", as many as the provider counted"
                : "; the provider reports no usage.prompt_tokens: its prompt length is not checked"));
        out.println("tokenizer             : " + tokDir + " (every provider token mapped to one id)");
        out.println("not checked           : the provider's weights and serving precision (a provider says neither), any layer, positions before the completion"
                + (idsChecked ? "" : ", which ids the candidate's rows followed (a bare logit file does not say)"));
        out.print(g.text());
        for (String f : verdict.findings()) out.println("  finding     : " + f);
        out.println(within ? "VERDICT: WITHIN THE THRESHOLDS (" + t.text() + (anyGiven ? "" : "; the defaults") + ")"
                : "VERDICT: " + verdict.outcome().words() + " (" + t.text() + (anyGiven ? "" : "; the defaults") + ")");
        if (cmd.json != null) {
            Map<String, Object> report = new LinkedHashMap<>();
            report.put("candidate", candidate);
            report.put("reference", cmd.reference.toString());
            report.put("reference_kind", "provider logprobs (" + response.form() + ")");
            report.put("prompt_ids", prompt.ids());
            report.put("completion_ids", mapped.chosen());
            report.put("graded", g.json());
            report.put("thresholds", t.text());
            report.put("verdict", within ? "within" : "outside");
            report.put("decision", verdict.json());
            AtomicWrite.string(cmd.json, "--json", StrictJson.MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(report));
            out.println("json: " + cmd.json);
        }
        return verdict.exitCode();
    }

    /** A candidate dump says which ids it followed: they must be these. A bare logit file does not (false: its rows are taken as they are). */
    private static boolean checkCandidateIds(Path file, int[] ids, Function<String, RuntimeException> usage) {
        int[] got = LogitFile.followedIds(file);
        if (got != null && !Arrays.equals(got, ids)) {
            throw usage.apply("refused: the candidate " + file + " followed other ids than the prompt and the provider's completion (" + got.length + " ids, "
                    + ids.length + " here, or the same count with other ids)");
        }
        return got != null;
    }

    private static float[] teacherForced(CompareLogitsCommand cmd, int[] ids, int np, int v, Function<String, RuntimeException> usage) {
        try (k3j.api.Engine e = k3j.api.Engine.open(cmd.shape.model, k3j.api.Plan.resident(),
                k3j.api.Engine.Options.DEFAULTS.plannedFor(ids.length, 0, false).withReport(s -> {}, s -> {}))) {
            float[] all = e.teacherForcedLogits(ids);
            return Arrays.copyOfRange(all, (np - 1) * v, (ids.length - 1) * v);
        } catch (k3j.api.Engine.OpenException e) {
            throw usage.apply("--run: " + e.getMessage());
        }
    }

    /**
     * The prompt of an OpenAI-style request: chat {@code messages} rendered with the model's chat template (XTML; the
     * thinking channel as {@code reasoning_effort} says, off when it is absent), or completions {@code prompt} as text or ids.
     */
    static Prompt prompt(Path request, Tokenizer tok) {
        Function<String, RuntimeException> fail = ProviderResponse.RefusedException::new;
        JsonNode root;
        try {
            root = StrictJson.read(SafeFiles.readAll(request, MAX_REQUEST_BYTES, "a request"));
        } catch (IOException e) {
            throw fail.apply(request + ": " + SafeFiles.why(e));
        }
        String w = request.toString();
        if (root == null || !root.isObject()) throw fail.apply(w + " is not a JSON object");
        for (var it = root.fieldNames(); it.hasNext(); ) {
            String f = it.next();
            if (!REQUEST_FIELDS.contains(f)) {
                throw fail.apply(w + " asks with \"" + f + "\", which changes what the provider was asked beyond the prompt graded here "
                        + "(tools, a suffix, a bias, a penalty, a format...): refused; grade a request of messages or prompt, and the sampling and logprobs fields");
            }
        }
        boolean chat = root.has("messages"), completions = root.has("prompt");
        if (chat == completions) throw fail.apply(w + " holds " + (chat ? "both messages and prompt" : "neither messages (chat) nor prompt (completions)"));
        if (completions) {
            JsonNode p = root.get("prompt");
            if (p.isTextual()) return new Prompt(tok.encode(p.textValue(), false), w + " (its prompt text, encoded as ordinary text)");
            if (p.isArray()) return new Prompt(StrictJson.ints(root, "prompt", w, fail), w + " (its prompt ids)");
            throw fail.apply(w + ".prompt is " + StrictJson.describe(p) + ", must be a string or a list of ids");
        }
        JsonNode ms = StrictJson.array(root, "messages", w, fail);
        List<Message> msgs = new ArrayList<>();
        for (int i = 0; i < ms.size(); i++) {
            String mw = w + ".messages[" + i + "]";
            JsonNode m = ms.get(i);
            if (!m.isObject()) throw fail.apply(mw + " is " + StrictJson.describe(m) + ", must be an object");
            String roleName = StrictJson.text(m, "role", mw, fail);
            Role role = Role.of(roleName);
            if (role == null) throw fail.apply(mw + ".role \"" + roleName + "\" is not system, user or assistant");
            msgs.add(new Message(role, content(m, mw), null));
        }
        Thinking thinking = Thinking.OFF;
        if (root.has("reasoning_effort")) {
            try {
                thinking = new Thinking(true, StrictJson.text(root, "reasoning_effort", w, fail));
            } catch (IllegalArgumentException e) {
                throw fail.apply(w + ".reasoning_effort: " + e.getMessage());
            }
        }
        try {
            Xtml x = new Xtml(tok);
            return new Prompt(x.encode(x.render(msgs, thinking, true)), w + " (" + msgs.size() + " messages in the chat template, thinking "
                    + (thinking.on() ? "on, effort " + thinking.effort() : "off") + ")");
        } catch (ChatException e) {
            throw fail.apply(w + ": " + e.getMessage());
        }
    }

    /** A message's content: a string, or a list of {type: text, text} parts joined. */
    private static String content(JsonNode m, String w) {
        Function<String, RuntimeException> fail = ProviderResponse.RefusedException::new;
        JsonNode c = StrictJson.need(m, "content", w, fail);
        if (c.isTextual()) return c.textValue();
        if (!c.isArray()) throw fail.apply(w + ".content is " + StrictJson.describe(c) + ", must be a string or a list of text parts");
        List<String> parts = new ArrayList<>();
        for (int i = 0; i < c.size(); i++) {
            String pw = w + ".content[" + i + "]";
            String type = StrictJson.text(c.get(i), "type", pw, fail);
            if (!type.equals("text")) throw fail.apply(pw + ".type \"" + type + "\": only text parts are part of a text model's prompt");
            parts.add(StrictJson.text(c.get(i), "text", pw, fail));
        }
        return parts.stream().collect(Collectors.joining());
    }
}
