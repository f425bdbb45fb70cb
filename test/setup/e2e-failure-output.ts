import { afterEach } from "vitest";
import { runningServersOutput } from "@/test/e2e/support/berth-server";
import { openPagesOutput } from "@/test/e2e/support/chromium";

/**
 * A failing e2e test prints what its open pages show and what its server logged: a browser timeout alone
 * says what the page did not show; the page's text (an error message, another page) and the server's
 * warnings and errors (a job that failed, a request that was refused) say why.
 */
afterEach(async (context) => {
  if (context.task.result?.state !== "fail") return;
  for (const output of await openPagesOutput()) console.error(`[e2e] ${context.task.name}: page\n${output}`);
  for (const output of runningServersOutput())
    console.error(`[e2e] ${context.task.name}: server output\n${output}`);
});
