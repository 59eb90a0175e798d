import { defineConfig } from "allure";

export default defineConfig({
  name: "k3j conformance",
  output: process.env.K3_REPORT_OUT ?? "../reports/allure-report",
  plugins: {
    awesome: {
      options: {
        singleFile: true,
        reportLanguage: "en",
        reportName: "k3j conformance",
        groupBy: ["epic", "feature", "story"],
      },
    },
  },
});
