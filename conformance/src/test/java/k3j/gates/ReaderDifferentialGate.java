package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.qameta.allure.Epic;
import io.qameta.allure.Feature;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.io.Npy;
import k3j.io.Npz;
import k3j.io.ZipArchive;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * k3j reads an .npy or .npz exactly as numpy and Python's zipfile read it, or refuses it. {@code ci/differential.py}
 * (run by {@code -Dk3.python}, default /usr/bin/python3 with Debian's python3-numpy) writes fuzzed files, valid ones
 * from numpy's and zipfile's own writers mutated up to three times (duplicate, extra and quoted keys, dtypes, Fortran
 * order, shapes, versions, header lengths, truncation, central entries against local headers, no central directory,
 * zip64 records, data descriptors, comments, prepended and appended bytes), and what those readers read from each.
 * Every file k3j accepts must hold what they read: the same entries and bytes, the same arrays (dtype, Fortran flag,
 * shape, sha256 of the C-order bytes). Runs in batches for {@code -Dk3.differential.seconds} (default 60) and counts
 * executions; it fails when a mismatch is found, and when too few files were accepted by both for the run to mean
 * anything (the unmutated bases must be read by k3j).
 */
@Tag("differential")
@Epic("readers")
class ReaderDifferentialGate {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int BATCH = 400;

    @TempDir
    Path tmp;

    @Test
    @Feature("npy and npz against numpy and zipfile")
    @DisplayName("every fuzzed .npy and .npz is refused or read exactly as numpy and Python's zipfile read it")
    void readsAsNumpyOrRefuses() throws Exception {
        String python = System.getProperty("k3.python", "/usr/bin/python3");
        long seconds = Long.parseLong(System.getProperty("k3.differential.seconds", "60").trim());
        long seed = Long.parseLong(System.getProperty("k3.differential.seed", String.valueOf(System.currentTimeMillis() / 1000)).trim());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        int runs = 0, accepted = 0, basesRead = 0, bases = 0;
        Map<String, String> mismatches = new TreeMap<>();
        for (long batch = 0; runs == 0 || System.nanoTime() < deadline; batch++) {
            Path dir = tmp.resolve("b" + batch);
            Process p = new ProcessBuilder(python, Project.root().resolve("ci/differential.py").toString(), dir.toString(),
                    "--seed", String.valueOf(seed + batch), "--count", String.valueOf(BATCH)).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes());
            assertEquals(0, p.waitFor(), python + " ci/differential.py failed (it needs numpy: apt-get install python3-numpy):\n" + out);
            for (String line : Files.readAllLines(dir.resolve("read.jsonl"))) {
                JsonNode c = JSON.readTree(line);
                runs++;
                Path f = dir.resolve(c.get("file").asText());
                boolean base = c.get("mutations").isEmpty() && readable(c.get("numpy"));
                if (base) bases++;
                String why = judge(f, c);
                if (why == null) continue;
                if (why.isEmpty()) {
                    accepted++;
                    if (base) basesRead++;
                    continue;
                }
                Path kept = Files.createDirectories(Project.root().resolve("reports/differential"));
                Files.copy(f, kept.resolve("seed" + (seed + batch) + "-" + f.getFileName()), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
                mismatches.putIfAbsent(why.replaceAll("[0-9a-f]{64}", "…"), c.get("file").asText() + " (seed " + (seed + batch) + ", " + c.get("mutations") + ")");
            }
            Project.deleteTree(dir);
        }
        Map<String, Object> table = new LinkedHashMap<>();
        table.put("seed", seed);
        table.put("seconds", seconds);
        table.put("executions", runs);
        table.put("read by k3j and the references alike", accepted);
        table.put("unmutated '<f4'/'<i4' C-order files read by k3j", basesRead + " of " + bases);
        table.put("distinct mismatches", mismatches.size());
        Evidence.json("differential run", table);
        if (!mismatches.isEmpty()) Evidence.json("mismatches (files kept in reports/differential/)", mismatches);
        System.out.println("differential: " + table);
        assertTrue(mismatches.isEmpty(), mismatches.size() + " files k3j reads otherwise than numpy/zipfile: " + mismatches);
        assertEquals(bases, basesRead, "k3j refused an unmutated file numpy wrote (" + basesRead + " of " + bases + " read)");
        assertTrue(bases >= 10 && accepted >= runs / 20, "too few files read by both to judge: " + table);
    }

    /** An unmutated file k3j must read: numpy read it and every array is '<f4' or '<i4' in C order. */
    private static boolean readable(JsonNode numpy) {
        if (!numpy.has("arrays")) return false;
        for (JsonNode a : numpy.get("arrays")) {
            if (!a.has("raw") && (!a.get("descr").asText().matches("<[fi]4") || a.get("fortran").asBoolean())) return false;
        }
        return true;
    }

    /** null: k3j refused it (always allowed); "": k3j read what the references read; else what differs. */
    private static String judge(Path f, JsonNode c) throws IOException {
        byte[] b = Files.readAllBytes(f);
        JsonNode numpy = c.get("numpy");
        boolean npz = f.toString().endsWith(".npz");
        Map<String, String> mine = new LinkedHashMap<>();
        Map<String, byte[]> entries;
        try {
            if (npz) {
                entries = ZipArchive.read(b, f.toString(), 1L << 30);
                Npz z = Npz.read(b, f.toString(), 1L << 30);
                z.arrays().forEach((k, a) -> mine.put(k, array(a)));
                z.others().forEach((k, v) -> mine.put(k, "raw " + sha(v)));
            } else {
                entries = null;
                mine.put("", array(Npy.parse(b, f.toString())));
            }
        } catch (Npy.NpyException | ZipArchive.ZipFormatException e) {
            return null;
        }
        if (numpy.has("refused")) return "k3j read a file numpy refuses (" + numpy.get("refused").asText() + ")";
        Map<String, String> theirs = new LinkedHashMap<>();
        numpy.get("arrays").properties().forEach(en -> {
            JsonNode a = en.getValue();
            theirs.put(en.getKey(), a.has("raw") ? "raw " + a.get("raw").asText()
                    : a.get("descr").asText() + " fortran=" + a.get("fortran").asBoolean() + " " + a.get("shape") + " " + a.get("sha256").asText());
        });
        if (!new TreeMap<>(mine).equals(new TreeMap<>(theirs))) return "k3j read " + new TreeMap<>(mine) + ", numpy " + new TreeMap<>(theirs);
        if (npz) {
            JsonNode z = c.get("zipfile");
            if (!z.has("entries") || z.get("entries").isNull()) return "k3j read a zip Python's zipfile refuses or reads with duplicate names (" + z + ")";
            Map<String, String> zs = new TreeMap<>(), ks = new TreeMap<>();
            z.get("entries").properties().forEach(en -> zs.put(en.getKey(), en.getValue().asText()));
            entries.forEach((k, v) -> ks.put(k, sha(v)));
            if (!zs.equals(ks)) return "k3j's zip entries " + ks + ", zipfile's " + zs;
        }
        return "";
    }

    private static String array(Npy a) {
        List<Long> shape = new ArrayList<>();
        for (long d : a.shape()) shape.add(d);
        return a.descr() + " fortran=false " + shape.toString().replace(" ", "") + " " + sha(a.bytes());
    }

    private static String sha(byte[] b) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
