package k3j.cli;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import k3j.io.AtomicWrite;
import k3j.model.StreamedTables;

/**
 * The --out JSON of {@code k3 run} (docs/semantics.md §7.7): the ids, the figures of the run, the settings and why it
 * stopped, and with --logprobs each generated id's logprob and alternatives. {@code trunkBinding}: what the streamed
 * trunk's data binding check did at open (null: the trunk is resident).
 */
final class RunJson {
    private RunJson() {}

    /** Writes {@code out}: what the run generated, with the figures of the run (docs/semantics.md §7.7). */
    static void write(Path out, k3j.api.Generated g, int[] promptIds, int bound, int completed, long drops, long expertBytes, long trunkBytes, long peak,
                      StreamedTables tables, k3j.api.Settings settings, int eos, k3j.trunk.DataBinding.Result trunkBinding,
                      List<k3j.api.Serving.TokenLogprob> logprobs) throws IOException {
        int[] generated = g == null ? new int[0] : g.ids();
        double wall = g == null ? 0 : g.seconds();
        String generatedText = g != null ? g.text() : null;
        String stopped = g == null ? null : switch (g.stop()) {
            case END_OF_SEQUENCE -> "eos";
            case MAX_TOKENS -> "max_tokens";
            case INTERRUPTED -> "interrupted";
        };
        AtomicWrite.write(out, "--out", os -> writeJson(os, promptIds, generated, wall, bound, completed, drops, expertBytes, trunkBytes, peak, generatedText, tables,
                settings, eos, stopped, trunkBinding, logprobs));
    }

    private static void writeJson(OutputStream os, int[] promptIds, int[] generated, double wall, int bound, int completed, long drops,
                                  long expertBytes, long trunkBytes, long peak, String generatedText, StreamedTables tables,
                                  k3j.api.Settings settings, int eos, String stopped, k3j.trunk.DataBinding.Result binding,
                                  List<k3j.api.Serving.TokenLogprob> logprobs) throws IOException {
        try (JsonGenerator j = new JsonFactory().createGenerator(os, JsonEncoding.UTF8)) {
            j.writeStartObject();
            j.writeFieldName("prompt_ids");
            j.writeArray(promptIds, 0, promptIds.length);
            j.writeFieldName("generated_ids");
            j.writeArray(generated, 0, generated.length);
            int[] full = new int[promptIds.length + generated.length];
            System.arraycopy(promptIds, 0, full, 0, promptIds.length);
            System.arraycopy(generated, 0, full, promptIds.length, generated.length);
            j.writeFieldName("full_ids");
            j.writeArray(full, 0, full.length);
            j.writeNumberField("layers", bound);
            j.writeNumberField("layers_requested", bound);
            j.writeNumberField("layers_completed", completed);
            j.writeNumberField("expert_drops", drops);
            j.writeNumberField("peak_rss_bytes", peak);
            j.writeFieldName("wall_seconds");
            j.writeRawValue(String.format(Locale.ROOT, "%.4f", wall));
            j.writeFieldName("seconds_per_token");
            j.writeRawValue(String.format(Locale.ROOT, "%.4f", generated.length == 0 ? 0.0 : wall / generated.length));
            j.writeNumberField("expert_bytes_read", expertBytes);
            j.writeNumberField("trunk_bytes_read", trunkBytes);
            j.writeNumberField("embedding_bytes_read", tables != null ? tables.embeddingBytesRead() : 0);
            j.writeNumberField("lm_head_bytes_read", tables != null ? tables.lmHeadBytesRead() : 0);
            j.writeBooleanField("ultra_low_memory", tables != null);
            if (binding != null) {
                j.writeObjectFieldStart("trunk_binding");
                j.writeStringField("check", binding.mode().flag());
                j.writeNumberField("shards_changed_since_pack", binding.changedShards().size());
                j.writeNumberField("tensors_hashed", binding.tensorsHashed());
                j.writeNumberField("bytes_hashed", binding.bytesHashed());
                j.writeEndObject();
            }
            if (generatedText != null) j.writeStringField("generated_text", generatedText);
            else j.writeNullField("generated_text");
            j.writeObjectFieldStart("sampling");
            j.writeNumberField("temperature", settings.sampling().temperature());
            j.writeNumberField("top_p", settings.sampling().topP());
            j.writeNumberField("top_k", settings.sampling().topK());
            j.writeNumberField("seed", settings.sampling().seed());
            j.writeEndObject();
            j.writeNumberField("max_tokens", settings.maxTokens());
            j.writeBooleanField("incremental", settings.incremental());
            j.writeNumberField("speculative", settings.speculative());
            j.writeBooleanField("stop_at_eos", settings.stopAtEos());
            if (eos >= 0) j.writeNumberField("eos_id", eos);
            else j.writeNullField("eos_id");
            if (stopped != null) j.writeStringField("stopped", stopped);
            else j.writeNullField("stopped");
            j.writeNumberField("steps", generated.length);
            if (logprobs != null) {
                j.writeArrayFieldStart("logprobs");   // float32 values, written as their shortest decimal
                for (k3j.api.Serving.TokenLogprob t : logprobs) {
                    j.writeStartObject();
                    j.writeNumberField("id", t.id());
                    j.writeNumberField("logprob", t.logprob());
                    j.writeFieldName("top_ids");
                    j.writeArray(t.topIds(), 0, t.topIds().length);
                    j.writeArrayFieldStart("top_logprobs");
                    for (float f : t.topLogprobs()) j.writeNumber(f);
                    j.writeEndArray();
                    j.writeEndObject();
                }
                j.writeEndArray();
            }
            j.writeEndObject();
        }
    }
}
