import { defineConfig } from "allure";
import { readFileSync } from "node:fs";

// Allure 3 takes categories from its config, not from categories.json in the results folder:
// load the committed reports/categories.json (the "[binding error]" ... message tags) here.
// Its regexes are JavaScript's: the Java-style "(?s)" (dot matches newlines) prefix becomes [\s\S].
const javaToJs = (re) => (re?.startsWith("(?s)") ? re.slice(4).replaceAll(".*", "[\\s\\S]*") : re);
const categories = JSON.parse(readFileSync(new URL("../reports/categories.json", import.meta.url), "utf8")).map((c) => ({
  ...c,
  ...(c.messageRegex !== undefined && { messageRegex: javaToJs(c.messageRegex) }),
  ...(c.traceRegex !== undefined && { traceRegex: javaToJs(c.traceRegex) }),
}));

export default defineConfig({
  name: "k3j conformance",
  output: process.env.K3_REPORT_OUT ?? "../reports/allure-report",
  categories,
  plugins: {
    awesome: {
      options: {
        singleFile: true,
        reportLanguage: "en",
        reportName: "k3j conformance",
        groupBy: ["epic", "feature", "story"],
        // failures first: groups holding a failed case, then the failed cases within them, come before green ones
        defaultSortBy: "status,asc",
      },
    },
  },
});
