package k3j.probe;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.function.Consumer;
import k3j.api.Engine;
import k3j.api.Plan;
import k3j.tokenizer.Tokenizer;

/**
 * What the server's answers are judged against: the logits that predict each completion token of an answer, given
 * the prompt and the completion the server chose (teacher-forced), and the model's tokenizer.
 */
public interface Reference extends AutoCloseable {
    /** {@return the model's tokenizer (token identity, chat template), or null when the model has none: then only vLLM's token_id:N names a token} */
    Tokenizer tokenizer();

    /** {@return the vocabulary's size} */
    int vocab();

    /** {@return who computes it, for the first screen} */
    String describe();

    /**
     * The [n, vocab] logits, row i predicting completion id i after the prompt and the completion before it; n is the
     * completion's length, or fewer when the reference holds only that many (a dump whose ids part from the completion).
     */
    float[] rows(int[] prompt, int[] completion);

    @Override
    void close();

    /** The logits rows of one answer: see {@link #rows}. */
    interface Rows {
        float[] rows(int[] prompt, int[] completion);
    }

    /** A reference from its parts. */
    record Of(Tokenizer tokenizer, int vocab, String describe, Rows source, AutoCloseable closer) implements Reference {
        @Override
        public float[] rows(int[] prompt, int[] completion) {
            return source.rows(prompt, completion);
        }

        @Override
        public void close() {
            try {
                closer.close();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
    }

    /**
     * A reference dump ({@code docs/formats.md} §7): its teacher-forced logits over its own prompt and generated ids.
     * Only its prompt can be graded, and only as far as the server's completion follows the dump's ids (one row past
     * the first id where they part); {@code tokDir} holds the model's tokenizer.
     */
    static Reference dump(Path dumpPath, Path tokDir) {
        k3j.dump.ReferenceDump d = k3j.dump.ReferenceDump.open(dumpPath);
        Tokenizer tok = Tokenizer.load(tokDir);
        int v = d.shape("logits")[1];
        float[] logits = d.f32("logits");
        int[] prompt = d.promptIds(), generated = d.generatedIds();
        String what = "the reference dump " + d.source() + " (" + d.producer() + "; its prompt of " + prompt.length + " ids and its " + generated.length + " generated ids)";
        return new Of(tok, v, what, (p, completion) -> {
            if (!Arrays.equals(p, prompt)) throw new IllegalArgumentException("the dump holds the logits of its own prompt only");
            int n = 0;
            while (n < completion.length && n < generated.length) {
                n++;
                if (completion[n - 1] != generated[n - 1]) break;
            }
            return Arrays.copyOfRange(logits, (prompt.length - 1) * v, (prompt.length - 1 + n) * v);
        }, () -> {});
    }

    /**
     * k3j computing on the model folder {@code dir} under {@code plan}: one teacher-forced forward over prompt and
     * completion per answer graded, planned for {@code positions} positions.
     */
    static Reference model(Path dir, Path tokDir, Plan plan, int threads, int positions, Consumer<String> report) {
        Tokenizer tok = tokDir == null ? null : Tokenizer.load(tokDir);
        Engine.Options o = Engine.Options.DEFAULTS.withThreads(threads).plannedFor(positions, 0, false).withReport(report, s -> {});
        Engine e = Engine.open(dir, plan, tokDir == null ? o : o.withTokenizer(tokDir));
        int v = e.shape().vocabSize();
        return new Of(tok, v, "k3j on " + dir + " (teacher-forced over each answer's prompt and completion)", (prompt, completion) -> {
            int[] ids = Arrays.copyOf(prompt, prompt.length + completion.length);
            System.arraycopy(completion, 0, ids, prompt.length, completion.length);
            float[] all = e.teacherForcedLogits(ids);
            return Arrays.copyOfRange(all, (prompt.length - 1) * v, (ids.length - 1) * v);
        }, e);
    }
}
