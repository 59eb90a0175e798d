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
    /** {@return the model's tokenizer (token identity, chat template)} */
    Tokenizer tokenizer();

    /** {@return the vocabulary's size} */
    int vocab();

    /** {@return who computes it, for the first screen} */
    String describe();

    /** The [completion.length, vocab] logits: row i predicts completion id i after the prompt and the completion before it. */
    float[] rows(int[] prompt, int[] completion);

    @Override
    void close();

    /**
     * k3j computing on the model folder {@code dir} under {@code plan}: one teacher-forced forward over prompt and
     * completion per answer graded, planned for {@code positions} positions.
     */
    static Reference model(Path dir, Path tokDir, Plan plan, int threads, int positions, Consumer<String> report) {
        Tokenizer tok = Tokenizer.load(tokDir);
        Engine e = Engine.open(dir, plan, Engine.Options.DEFAULTS.withThreads(threads).withTokenizer(tokDir).plannedFor(positions, 0, false).withReport(report, s -> {}));
        int v = e.shape().vocabSize();
        return new Reference() {
            @Override
            public Tokenizer tokenizer() {
                return tok;
            }

            @Override
            public int vocab() {
                return v;
            }

            @Override
            public String describe() {
                return "k3j on " + dir + " (teacher-forced over each answer's prompt and completion)";
            }

            @Override
            public float[] rows(int[] prompt, int[] completion) {
                int[] ids = Arrays.copyOf(prompt, prompt.length + completion.length);
                System.arraycopy(completion, 0, ids, prompt.length, completion.length);
                float[] all = e.teacherForcedLogits(ids);
                return Arrays.copyOfRange(all, (prompt.length - 1) * v, (ids.length - 1) * v);
            }

            @Override
            public void close() {
                e.close();
            }
        };
    }
}
