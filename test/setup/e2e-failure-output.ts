import { afterEach } from "vitest";
import { getDb } from "@/server/db";
import { runningServersOutput } from "@/test/e2e/support/berth-server";
import { openPagesOutput } from "@/test/e2e/support/chromium";
import { sharedServerOutput } from "@/test/e2e/support/shared-app";

/**
 * A failing e2e test prints what its open pages show, what its server (its own or the one the files share)
 * logged and the workspace events of the last ten minutes: a browser timeout alone says what the page did not show; the page's text (an error
 * message, another page), the server's warnings and errors (a job that failed, a request that was refused)
 * and the workspaces' ledger (who provisioned, stopped or purged what, and when) say why.
 */
afterEach(async (context) => {
  if (context.task.result?.state !== "fail") return;
  for (const output of await openPagesOutput()) console.error(`[e2e] ${context.task.name}: page\n${output}`);
  for (const output of runningServersOutput())
    console.error(`[e2e] ${context.task.name}: server output\n${output}`);
  // The server the files share runs in the global setup's process, which keeps its output.
  const shared = await sharedServerOutput();
  if (shared) console.error(`[e2e] ${context.task.name}: shared server output (last 80 lines)\n${shared}`);
  const events = await getDb()
    .workspaceEvent.findMany({
      where: { at: { gte: new Date(Date.now() - 10 * 60_000) } },
      orderBy: { at: "asc" },
      take: 200,
      select: { at: true, workspaceId: true, kind: true, actor: true, reason: true },
    })
    .catch((error: unknown) => [
      { at: new Date(), workspaceId: "-", kind: String(error), actor: "", reason: "" },
    ]);
  console.error(
    `[e2e] ${context.task.name}: workspace events of the last 10 minutes\n${events
      .map((e) => `${e.at.toISOString()} ${e.workspaceId} ${e.kind} by ${e.actor}: ${e.reason ?? ""}`)
      .join("\n")}`,
  );
});
