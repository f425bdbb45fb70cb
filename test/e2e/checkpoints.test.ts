/**
 * Turn checkpoints in the dashboard (issue 24), end to end: the admin sends turns in the browser whose fake
 * model runs Bash (files made, then `rm -rf`), opens a turn's changes (its file list, then a removed file's
 * text diff), reverts the session to the earlier turn (a double click starts one revert; the progress ends
 * DONE, the files are back and the later turn is dimmed and marked reverted), and forks a new session from
 * a turn, landing on it. A viewer sees the changes but cannot revert; the settings page edits retention.
 * Real server (as `npm start` runs it), Postgres, Redis, workers, a local workspace and Chromium; only the
 * model is the loopback fake.
 */
import { randomUUID } from "node:crypto";
import type { Locator, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAuth } from "@/server/auth/auth";
import { createBerthClient, type BerthClient } from "@/server/client/create-berth-client";
import { processBerth } from "@/server/composition/process-berth";
import { getDb } from "@/server/db";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import { getTenantPolicy } from "@/server/modules/tenant/tenant-policy.data";
import { type FakeModelServer, startFakeModel } from "@/test/fixtures/fake-model/server";
import { sendChatTurn } from "./support/chat-turn";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp } from "./support/e2e-app";
import { screenshotter } from "./support/screenshots";
import { signedInPages, type User } from "./support/signed-in";
import { addTenantUser } from "./support/tenant-users";

requireChromium();

const MODEL_KEY = "sk-e2e-checkpoints";
const FIRST = "mkdir -p src && printf 'one\\ntwo\\n' > src/a.txt && echo keep > keep.txt";
const SECOND = "rm -rf src && echo new > b.txt";
const shot = screenshotter("checkpoints");

/** Two clicks in the same task, before React can re-render the button disabled: a double click at its fastest. */
const clickTwiceAtOnce = (button: Locator) =>
  button.evaluate((element: HTMLElement) => {
    element.click();
    element.click();
  });

/** How many tRPC requests to `procedure` the page sends from now on. */
function countCalls(page: Page, procedure: string): () => number {
  let sent = 0;
  page.on("request", (request) => {
    if (request.url().includes("/api/trpc/") && request.url().includes(procedure)) sent++;
  });
  return () => sent;
}

describe.skipIf(!HAS_CHROMIUM)("turn checkpoints in the dashboard", () => {
  let e2e: E2eApp;
  let fake: FakeModelServer;
  let client: BerthClient;
  let open: ReturnType<typeof signedInPages>;
  let admin: User;
  let viewer: User;
  let sessionId = "";
  let workspaceId = "";

  beforeAll(async () => {
    fake = await startFakeModel({ apiKey: MODEL_KEY });
    e2e = await startE2eApp();
    const { tenant, app, browser } = e2e;
    admin = { email: tenant.email, password: tenant.password };
    open = signedInPages(app, browser, tenant.slug);
    viewer = await addTenantUser(e2e, "viewer");
    const auth = createAuth({
      secret: process.env.BERTH_AUTH_SECRET!,
      baseUrl: e2e.baseUrl,
      prisma: getDb(),
      log: () => {},
    });
    const { plainKey } = await createApiKey(
      auth,
      tenant.scope,
      { name: "e2e checkpoints", role: "admin" },
      apiKeySecret(processBerth().config),
      getDb(),
    );
    client = createBerthClient({ url: e2e.baseUrl, apiKey: plainKey });
    const agent = await client.agent.create.mutate({
      tenantId: tenant.scope.tenantId,
      name: `cp-${randomUUID().slice(0, 6)}`,
      modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: MODEL_KEY },
    });
    ({ sessionId, workspaceId } = await client.session.create.mutate({
      tenantId: tenant.scope.tenantId,
      agentId: agent.id,
      name: "checkpointed",
    }));
  });

  afterAll(async () => {
    await e2e?.close();
    await fake?.close();
  });

  /** The model's next turn runs `command` in Bash, then answers. */
  const bashNext = (command: string) =>
    fake.enqueue(
      {
        kind: "tool-calls",
        calls: [{ id: `c_${randomUUID().slice(0, 8)}`, name: "Bash", arguments: { command } }],
      },
      { kind: "text", text: "done" },
    );

  /** Sends `command` from the page; resolves once its turn shows its changes (its checkpoint is listed). */
  async function sendTurn(page: Page, command: string, nth: number) {
    bashNext(command);
    const box = page.getByRole("form", { name: "Send a message" }).getByLabel("Message");
    await box.fill(command);
    await box.press("Enter");
    await page.getByTestId("turn-changes").nth(nth).waitFor();
  }

  const changesOf = (page: Page, command: string) =>
    page
      .getByTestId("chat-message")
      .filter({ has: page.getByTestId("message-text").filter({ hasText: command }) })
      .getByTestId("turn-changes");

  it("shows each turn's changes, its file list and a file's text diff", async () => {
    const { page, pageErrors } = await open(`/sessions/${sessionId}`, admin);
    await sendTurn(page, FIRST, 0);
    await sendTurn(page, SECOND, 1);
    expect(await changesOf(page, FIRST).getAttribute("aria-label")).toBe(
      "Changes in this turn: 2 added, 0 changed, 0 removed",
    );
    expect(await changesOf(page, SECOND).textContent()).toBe("+1~0−1");

    await changesOf(page, SECOND).click();
    const dialog = page.getByTestId("turn-changes-dialog");
    const files = dialog.getByTestId("changed-file");
    await files.first().waitFor();
    expect(await files.allTextContents()).toEqual(["addedb.txt4 B", "removedsrc/a.txt8 B"]);
    await files.filter({ hasText: "src/a.txt" }).click();
    const lines = dialog.getByTestId("diff-line");
    await lines.filter({ hasText: "two" }).waitFor();
    const removed = lines.and(page.locator("[data-kind=removed]"));
    expect(await removed.allTextContents()).toEqual(["1-one", "2-two"]);
    await shot(page, "turn-diff");
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "detached" });
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("lets a viewer read the changes but not revert or fork", async () => {
    const { page, pageErrors } = await open(`/sessions/${sessionId}`, viewer);
    await changesOf(page, FIRST).click();
    const dialog = page.getByTestId("turn-changes-dialog");
    await dialog.getByTestId("changed-file").first().waitFor();
    expect(await dialog.getByRole("button", { name: "Revert to this turn" }).isDisabled()).toBe(true);
    expect(await dialog.getByRole("button", { name: "Fork from this turn" }).isDisabled()).toBe(true);
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("reverts to the earlier turn: one restore, DONE, files back, the later turn marked", async () => {
    const { page, pageErrors } = await open(`/sessions/${sessionId}`, admin);
    const dialog = page.getByTestId("turn-changes-dialog");
    const confirm = page.getByTestId("confirm-dialog");

    // While a turn runs, the revert is refused as a CONFLICT, said in words; the turn goes on.
    fake.enqueue({ kind: "stall", text: ["thinking"] });
    const box = page.getByRole("form", { name: "Send a message" }).getByLabel("Message");
    await box.fill("hold on");
    await box.press("Enter");
    await page.getByTestId("turn-streaming").waitFor();
    await changesOf(page, FIRST).click();
    await dialog.getByRole("button", { name: "Revert to this turn" }).click();
    await confirm.getByRole("button", { name: "Revert" }).click();
    const refusal = dialog.getByTestId("checkpoint-action-error");
    await refusal.waitFor();
    expect(await refusal.getAttribute("data-code")).toBe("CONFLICT");
    expect(await refusal.textContent()).toMatch(/^Not now: .*in use/);
    await shot(page, "revert-conflict");
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "detached" });
    await page.getByRole("button", { name: "Cancel turn" }).click();
    await page.getByTestId("turn-cancelled").waitFor();
    // The turn's lease goes with it, just after its end is shown.
    await vi.waitFor(
      async () =>
        expect(
          await getDb().workspaceLease.count({ where: { workspaceId, expiresAt: { gt: new Date() } } }),
        ).toBe(0),
      { timeout: 30_000, interval: 200 },
    );

    const reverts = countCalls(page, "checkpoint.revert");
    // The chat re-renders as the cancelled turn settles: a click that lands on a row being replaced opens
    // nothing, so it is made again until the dialog is there.
    const revertButton = dialog.getByRole("button", { name: "Revert to this turn" });
    await vi.waitFor(
      async () => {
        if (!(await dialog.isVisible())) await changesOf(page, FIRST).click();
        expect(await revertButton.isVisible()).toBe(true);
      },
      { timeout: 60_000, interval: 500 },
    );
    await revertButton.click();
    expect(await confirm.textContent()).toContain("not deleted");
    await clickTwiceAtOnce(confirm.getByRole("button", { name: "Revert" }));
    // The progress shows above the chat until the workers end it: DONE, or FAILED with its reason.
    const progress = page.getByTestId("restore-progress").and(page.locator(":not([data-status=running])"));
    await progress.waitFor();
    expect(await progress.getAttribute("data-status"), (await progress.textContent()) ?? "").toBe("done");
    expect(reverts()).toBe(1);
    // The later turn stays in the transcript, dimmed and marked; the earlier one is not.
    const secondUser = page
      .getByTestId("chat-message")
      .filter({ has: page.getByTestId("message-text").filter({ hasText: SECOND }) });
    await secondUser.getByTestId("reverted-badge").waitFor();
    expect(await secondUser.getAttribute("data-reverted")).toBe("true");
    const firstUser = page
      .getByTestId("chat-message")
      .filter({ has: page.getByTestId("message-text").filter({ hasText: FIRST }) });
    expect(await firstUser.getAttribute("data-reverted")).toBeNull();
    await shot(page, "reverted");

    // The revert is undoable from the banner (the folder before it is a checkpoint of its own): the
    // later turn is the session's again. Then the revert once more, for what follows.
    const undos = countCalls(page, "checkpoint.revert");
    await clickTwiceAtOnce(progress.getByRole("button", { name: "Undo revert" }));
    await page
      .locator('[data-testid="restore-progress"][data-status="running"]')
      .waitFor({ state: "detached" });
    await secondUser.getByTestId("reverted-badge").waitFor({ state: "detached" });
    expect(undos()).toBe(1);
    await progress.getByRole("button", { name: "Dismiss" }).click();
    await changesOf(page, FIRST).click();
    await dialog.getByRole("button", { name: "Revert to this turn" }).click();
    await confirm.getByRole("button", { name: "Revert" }).click();
    await secondUser.getByTestId("reverted-badge").waitFor();
    expect(pageErrors).toEqual([]);
    await page.close();

    // The workspace is as the first turn left it.
    bashNext("cat src/a.txt keep.txt; test -e b.txt || echo b.txt-gone");
    const events = await sendChatTurn(client, {
      tenantId: e2e.tenant.scope.tenantId,
      sessionId,
      message: "check the files",
    });
    const result = events.find((event) => event.type === "tool-result") as { output: string } | undefined;
    expect(result?.output).toBe("one\ntwo\nkeep\nb.txt-gone\n");
  });

  it("forks a new session from a turn and lands on it", async () => {
    const { page, pageErrors } = await open(`/sessions/${sessionId}`, admin);
    const forks = countCalls(page, "checkpoint.fork");
    await changesOf(page, FIRST).click();
    await page
      .getByTestId("turn-changes-dialog")
      .getByRole("button", { name: "Fork from this turn" })
      .click();
    const form = page.getByRole("form", { name: "Fork session" });
    await form.getByLabel("Name").fill("forked at the first turn");
    await clickTwiceAtOnce(form.getByRole("button", { name: "Fork session" }));
    await page.waitForURL(
      (url) => /\/sessions\/[^/]+$/.test(url.pathname) && !url.pathname.endsWith(sessionId),
    );
    await page.getByRole("heading", { level: 1, name: "forked at the first turn" }).waitFor();
    // The fork's workspace is filled with the first turn's files by the workers, its progress followed.
    const progress = page.getByTestId("restore-progress").and(page.locator(":not([data-status=running])"));
    await progress.waitFor();
    expect(await progress.textContent()).toMatch(/^The fork's workspace is ready: \d+ files? written/);
    // The fork's transcript runs up to the first turn (its own turns will have checkpoints of their own).
    await page.getByTestId("message-text").filter({ hasText: FIRST }).waitFor();
    expect(await page.getByTestId("message-text").filter({ hasText: SECOND }).count()).toBe(0);
    expect(forks()).toBe(1);
    await shot(page, "fork");
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("edits checkpoint retention on the settings page", async () => {
    const { page, pageErrors } = await open("/settings", admin);
    const saves = countCalls(page, "tenant.setPolicy");
    const form = page.getByRole("form", { name: "Checkpoint retention" });
    await form.getByLabel("Keep the last turns").fill("25");
    await form.getByLabel("Storage cap", { exact: true }).fill("2");
    await form.getByLabel("Storage cap unit").selectOption("GiB");
    await clickTwiceAtOnce(form.getByRole("button", { name: "Save retention" }));
    await page.locator("[data-sonner-toast]").filter({ hasText: "Checkpoint retention saved." }).waitFor();
    expect(saves()).toBe(1);
    expect(await getTenantPolicy(e2e.tenant.scope, getDb())).toMatchObject({
      checkpointKeepTurns: 25,
      checkpointKeepDays: null,
      checkpointStorageBytes: 2 * 1024 ** 3,
    });
    // Emptied: back to the default.
    await form.getByLabel("Keep the last turns").fill("");
    await form.getByRole("button", { name: "Save retention" }).click();
    await expect
      .poll(async () => (await getTenantPolicy(e2e.tenant.scope, getDb())).checkpointKeepTurns)
      .toBeNull();
    await shot(page, "settings");
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("sends a risky turn: Checkpoint first records the workspace before the turn runs", async () => {
    const { page, pageErrors } = await open(`/sessions/${sessionId}`, admin);
    const form = page.getByRole("form", { name: "Send a message" });
    const before = await client.checkpoint.list.query({ tenantId: e2e.tenant.scope.tenantId, sessionId });
    await form.getByLabel("Checkpoint first").check();
    bashNext("echo risky > risky.txt");
    await form.getByLabel("Message").fill("a risky turn");
    await form.getByLabel("Message").press("Enter");
    await changesOf(page, "a risky turn").waitFor();
    const after = await client.checkpoint.list.query({ tenantId: e2e.tenant.scope.tenantId, sessionId });
    expect(after.slice(before.length).map((checkpoint) => checkpoint.kind)).toEqual(["BEFORE_TURN", "TURN"]);
    // One turn's choice: the box is clear for the next message.
    expect(await form.getByLabel("Checkpoint first").isChecked()).toBe(false);
    expect(pageErrors).toEqual([]);
    await page.close();
  });
});
