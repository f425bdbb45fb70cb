/**
 * Forms and roles in the browser: two fast clicks on a create button make one thing (a session, an
 * invitation link), and a member is offered only the sections their role may open. Real server (as
 * `npm start` runs it), Postgres, Redis and Chromium; the counts are read from the database.
 */
import type { Locator, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getDb } from "@/server/db";
import { hashInviteToken } from "@/server/modules/member/invite.service";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp } from "./support/e2e-app";
import { signedInPages, type User } from "./support/signed-in";
import { addTenantUser } from "./support/tenant-users";

requireChromium();

/** Two clicks in the same task, before React can re-render the button disabled: a double click at its fastest. */
const clickTwiceAtOnce = (button: Locator) =>
  button.evaluate((element: HTMLElement) => {
    element.click();
    element.click();
  });

/** Resolves once every tRPC request to `procedure` the page has sent so far has been answered. */
function answeredCalls(page: Page, procedure: string) {
  const answers: Promise<unknown>[] = [];
  page.on("request", (request) => {
    if (request.url().includes(`/api/trpc/`) && request.url().includes(procedure)) {
      answers.push(request.response());
    }
  });
  return {
    sent: () => answers.length,
    all: () => Promise.all(answers),
  };
}

describe.skipIf(!HAS_CHROMIUM)("forms and roles", () => {
  let e2e: E2eApp;
  let open: ReturnType<typeof signedInPages>;
  let admin: { email: string; password: string };
  let member: User;
  const pageErrors: string[][] = [];

  beforeAll(async () => {
    e2e = await startE2eApp();
    const { tenant, app, browser } = e2e;
    admin = { email: tenant.email, password: tenant.password };
    open = signedInPages(app, browser, tenant.slug);
    member = await addTenantUser(e2e, "member");
  });

  afterAll(async () => {
    await e2e?.close();
  });

  it("makes one session for two fast clicks on Create session", async () => {
    const { tenant } = e2e;
    const sessionsBefore = await getDb().session.count({ where: { tenantId: tenant.scope.tenantId } });
    const { page, pageErrors: errors } = await open("/sessions", admin);
    pageErrors.push(errors);
    const creates = answeredCalls(page, "session.create");
    await page.getByRole("button", { name: "New session" }).first().click();
    const form = page.getByRole("form", { name: "New session" });
    await form.getByLabel("Agent").selectOption({ label: "researcher" });
    await form.getByLabel("Session name").fill("double-clicked");
    await clickTwiceAtOnce(form.getByRole("button", { name: "Create session" }));
    await page.waitForURL(/\/sessions\/[^/]+$/);
    await creates.all();
    expect(creates.sent()).toBeGreaterThan(0);
    const made = await getDb().session.findMany({
      where: { tenantId: tenant.scope.tenantId, name: "double-clicked" },
    });
    expect(made).toHaveLength(1);
    expect(page.url()).toContain(`/sessions/${made[0]!.id}`);
    expect(await getDb().session.count({ where: { tenantId: tenant.scope.tenantId } })).toBe(
      sessionsBefore + 1,
    );
  });

  it("makes one invitation for two fast clicks on Create invitation link, and shows its link", async () => {
    const { tenant } = e2e;
    const { page, pageErrors: errors } = await open("/members", admin);
    pageErrors.push(errors);
    const creates = answeredCalls(page, "invite.create");
    await page.getByRole("button", { name: "Invite people" }).click();
    const form = page.getByRole("form", { name: "Create invitation" });
    await form.getByLabel("Note").fill("double-clicked invitation");
    await clickTwiceAtOnce(form.getByRole("button", { name: "Create invitation link" }));
    const link = (await page.getByTestId("invite-link").textContent()) ?? "";
    await creates.all();
    const made = await getDb().inviteLink.findMany({
      where: { tenantId: tenant.scope.tenantId, note: "double-clicked invitation" },
    });
    expect(made).toHaveLength(1);
    // The link on screen is the one invitation's.
    expect(hashInviteToken(link.split("/invite/")[1] ?? "")).toBe(made[0]!.tokenHash);
  });

  it("offers a member only the sections their role may open, and says why on the others", async () => {
    const { page, pageErrors: errors } = await open("", member);
    pageErrors.push(errors);
    const nav = page.getByRole("navigation", { name: "Tenant" });
    await nav.getByRole("link", { name: "Sessions" }).waitFor();
    const offered = await nav.getByRole("link").allTextContents();
    expect(offered).toEqual([
      "Overview",
      "Agents",
      "Sessions",
      "Workspaces",
      "Library",
      "Members",
      "Settings",
    ]);
    // Typed in by hand: one sentence naming the role, not a page of 403s.
    for (const section of ["jobs", "readiness", "webhooks", "audit", "api-keys"]) {
      await page.goto(`${e2e.app.url}/t/${e2e.tenant.slug}/${section}`);
      const notice = page.getByTestId("role-required");
      await notice.waitFor();
      expect(await notice.textContent()).toContain("needs the admin role; you are a member");
    }
    for (const errorsOfPage of pageErrors) expect(errorsOfPage).toEqual([]);
  });
});
