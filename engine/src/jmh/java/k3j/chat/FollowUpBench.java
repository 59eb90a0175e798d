package k3j.chat;

import k3j.Repo;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.io.CheckpointIndex;
import k3j.kernels.Workers;
import k3j.model.DecodeState;
import k3j.model.Forward;
import k3j.model.Model;
import k3j.sample.Sampler;
import k3j.state.Binding;
import k3j.state.StateFile;
import k3j.tokenizer.Tokenizer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * A follow-up chat turn on the tiny oracle model (thinking on, so the first turn carries the effort message):
 * {@code fromState} loads the state file saved after turn 1 and feeds only the follow-up (the reply's last id,
 * the next user message, the generation prompt); {@code recompute} renders the whole conversation from the
 * history and feeds all of it to a fresh state. Both end with the logits of the reply's first token (the chat
 * gate shows they are the same bits). ratio = recompute / fromState.   ci/bench-chat
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"-Xmx1g", "--add-modules", "jdk.incubator.vector"})
public class FollowUpBench {
    @Param({"2"})
    public int threads;

    Model model;
    Workers workers;
    Forward forward;
    Xtml xtml;
    Binding binding;
    Path state;
    int[] all;
    int stored;

    @Setup(Level.Trial)
    public void firstTurn() throws IOException {
        Path dir = Repo.path("oracle-fixtures/tiny-k3");
        ModelConfig cfg = ConfigReader.read(dir.resolve("config.json"));
        CheckpointIndex index = CheckpointIndex.open(dir);
        model = Model.open(index, cfg, -1);
        workers = Workers.of(threads);
        forward = model.forward(workers);
        xtml = new Xtml(Tokenizer.load(dir));
        binding = Binding.of(cfg, cfg.layerCount(), index);
        Conversation c = new Conversation(forward, xtml, Thinking.DEFAULT, new Sampler.Settings(0, 1, 0, 0), new Transcript(List.of(Message.system("be brief"))));
        c.turn("hello, who are you?", 24, id -> {}, () -> false);
        state = Files.createTempFile("k3j-followup", ".k3state");
        StateFile.save(state, binding, c.history().sha256(), c.ids(), c.state());
        stored = c.state().cached();
        int[] next = xtml.encode(xtml.nextTurn(Message.user("and what can you do?"), Thinking.DEFAULT));
        int[] ids = c.ids();
        boolean ended = ids[ids.length - 1] == xtml.ids().eom() || ids[ids.length - 1] == xtml.ids().eos();
        all = Xtml.concat(ids, ended ? new int[0] : new int[] {xtml.ids().eom()}, next);
        System.out.printf("%nturn 1 held %d positions; the follow-up feeds %d ids from the state, %d when recomputed%n", stored, all.length - stored, all.length);
    }

    @TearDown(Level.Trial)
    public void close() throws IOException {
        workers.close();
        model.close();
        Files.deleteIfExists(state);
    }

    @Benchmark
    public float[] fromState() {
        DecodeState st = forward.newState(all.length + 1);
        StateFile.load(state, binding, st);
        return forward.step(Arrays.copyOfRange(all, st.cached(), all.length), st, false, null).logits();
    }

    @Benchmark
    public float[] recompute() {
        DecodeState st = forward.newState(all.length + 1);
        return forward.step(all, st, false, null).logits();
    }
}
