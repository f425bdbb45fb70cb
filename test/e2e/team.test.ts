/**
 * The team workflow in the browser: the seeded admin invites someone by link, the person opens it in another
 * browser, sets a name and password, and lands in the tenant with the role given; the admin changes the role
 * and sees the invitation accepted; the new member changes their password on the profile page, which signs
 * their other session out; finally the admin removes them. Real server, Postgres, Redis and Chromium;
 * screenshots in test-results/screenshots/.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAuth } from "@/server/auth/auth";
import { getDb } from "@/server/db";
import { listMembers } from "@/server/modules/member/member.data";
import type { BerthServer } from "./support/berth-server";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp, submitSignIn, watchedPage } from "./support/e2e-app";
import { printScreenshotListing, screenshotter } from "./support/screenshots";
import type { SeededTenant } from "./support/seed";
import { processBerth } from "@/server/composition/process-berth";

requireChromium();

const shot = screenshotter("team");
const GRACE = { name: "Grace Hopper", password: "first-password-1", newPassword: "second-password-2" };

describe.skipIf(!HAS_CHROMIUM)("team: invitations, roles, passwords, end to end", () => {
  let app: BerthServer;
  let browser: Browser;
  let tenant: SeededTenant;
  let e2e: E2eApp;
  let admin: Page;
  let grace: Page;
  const pageErrors: string[][] = [];
  let inviteLink: string;
  let graceEmail: string;

  beforeAll(async () => {
    e2e = await startE2eApp();
    ({ app, browser, tenant } = e2e);
    graceEmail = `grace-${tenant.slug}@example.test`;
    const watched = await watchedPage(await browser.newContext({ viewport: { width: 1366, height: 900 } }));
    admin = watched.page;
    pageErrors.push(watched.pageErrors);
    await admin.goto(`${app.url}/sign-in`);
    await submitSignIn(admin, tenant.email, tenant.password);
    await admin.waitForURL(new RegExp(`/t/${tenant.slug}$`));
  });

  afterAll(async () => {
    await e2e?.close();
    printScreenshotListing("team");
  });

  const nav = (page: Page, name: string) =>
    page.getByRole("navigation", { name: "Tenant" }).getByRole("link", { name });
  const toast = (page: Page, text: string) => page.locator("[data-sonner-toast]").filter({ hasText: text });

  it("creates an invitation link for a role, shown once", async () => {
    await nav(admin, "Members").click();
    await admin.waitForURL(/\/members$/);
    await admin.getByRole("button", { name: "Invite people" }).click();
    const form = admin.getByRole("form", { name: "Create invitation" });
    await form.getByLabel("Role").selectOption("member");
    await form.getByLabel("Note").fill("Grace, platform team");
    await shot(admin, "invite-dialog");
    await form.getByRole("button", { name: "Create invitation link" }).click();
    inviteLink = (await admin.getByTestId("invite-link").textContent()) ?? "";
    expect(inviteLink).toMatch(new RegExp(`^${app.url}/invite/berth_inv_`));
    await shot(admin, "invite-link");
    await admin.getByRole("button", { name: "Done" }).click();
    await admin.getByTestId("invite-link").waitFor({ state: "detached" });
    const row = admin.getByTestId("invite-row").filter({ hasText: "Grace, platform team" });
    await row.getByTestId("invite-state").filter({ hasText: "pending" }).waitFor();
    // Shown once: the page no longer holds the token.
    expect(await admin.content()).not.toContain(inviteLink.split("/invite/")[1]);
  });

  it("lets the invited person set a name and password and land in the tenant with that role", async () => {
    const watched = await watchedPage(await browser.newContext({ viewport: { width: 1366, height: 900 } }));
    grace = watched.page;
    pageErrors.push(watched.pageErrors);
    await grace.goto(inviteLink);
    await grace.getByRole("heading", { name: `Join ${tenant.name}` }).waitFor();
    const form = grace.getByRole("form", { name: "Accept invitation" });
    await form.getByLabel("Name").fill(GRACE.name);
    await form.getByLabel("Email").fill(graceEmail);
    await form.getByLabel("Password", { exact: true }).fill(GRACE.password);
    await form.getByLabel("Confirm password").fill(GRACE.password);
    await shot(grace, "accept-invitation");
    await form.getByRole("button", { name: "Join" }).click();
    await grace.waitForURL(new RegExp(`/t/${tenant.slug}$`));
    expect(await grace.getByTestId("tenant-role").textContent()).toBe("member");
    await shot(grace, "new-member-overview");
    const member = (await listMembers(tenant.scope, processBerth().db)).find((m) => m.email === graceEmail);
    expect(member).toMatchObject({ name: GRACE.name, role: "member" });

    // The link worked once.
    const again = await watchedPage(await browser.newContext());
    await again.page.goto(inviteLink);
    await again.page.getByRole("heading", { name: "Invitation not valid" }).waitFor();
    await again.page.context().close();
  });

  it("shows the admin the accepted invitation and lets them change the new member's role", async () => {
    await admin.reload();
    await admin
      .getByTestId("invite-row")
      .filter({ hasText: "Grace, platform team" })
      .getByTestId("invite-state")
      .filter({ hasText: "accepted" })
      .waitFor();
    const row = admin.getByTestId("member-row").filter({ hasText: graceEmail });
    await row.getByLabel(`Role of ${graceEmail}`).selectOption("viewer");
    await toast(admin, `${graceEmail} is now viewer.`).waitFor();
    await shot(admin, "members-after-role-change");
    await grace.reload();
    await grace.getByTestId("tenant-role").filter({ hasText: "viewer" }).waitFor();
  });

  it("changes the member's password on the profile page and signs their other session out", async () => {
    // A second browser where Grace is signed in with the old password.
    const other = await watchedPage(await browser.newContext());
    pageErrors.push(other.pageErrors);
    await other.page.goto(`${app.url}/sign-in`);
    await submitSignIn(other.page, graceEmail, GRACE.password);
    await other.page.waitForURL(new RegExp(`/t/${tenant.slug}$`));

    await grace.getByTestId("account-link").click();
    await grace.waitForURL(/\/profile$/);
    await grace.getByTestId("profile-email").filter({ hasText: graceEmail }).waitFor();
    const form = grace.getByRole("form", { name: "Change password" });
    await form.getByLabel("Current password").fill("not-the-password");
    await form.getByLabel("New password", { exact: true }).fill(GRACE.newPassword);
    await form.getByLabel("Confirm new password").fill(GRACE.newPassword);
    await form.getByRole("button", { name: "Change password" }).click();
    await form.getByRole("alert").filter({ hasText: "current password is wrong" }).waitFor();
    await form.getByLabel("Current password").fill(GRACE.password);
    await form.getByRole("button", { name: "Change password" }).click();
    await toast(grace, "Password changed").waitFor();
    await shot(grace, "profile-password-changed");

    // This session stays; the other one is signed out; only the new password signs in.
    await grace.reload();
    await grace.getByTestId("profile-email").waitFor();
    await other.page.reload();
    await other.page.waitForURL(/\/sign-in/);
    // The old password is refused, the new one accepted (checked through better-auth directly, so the
    // browser's sign-ins stay under the endpoint's rate limit).
    const auth = createAuth({
      secret: process.env.BERTH_AUTH_SECRET!,
      baseUrl: app.url,
      prisma: getDb(),
      log: () => {},
    });
    await expect(
      auth.api.signInEmail({ body: { email: graceEmail, password: GRACE.password } }),
    ).rejects.toThrow();
    const signedIn = await auth.api.signInEmail({ body: { email: graceEmail, password: GRACE.newPassword } });
    expect(signedIn.user.email).toBe(graceEmail);
    await other.page.context().close();
  });

  it("lets the admin remove the member after a confirmation", async () => {
    const row = admin.getByTestId("member-row").filter({ hasText: graceEmail });
    await row.getByRole("button", { name: `Remove ${graceEmail}` }).click();
    const dialog = admin.getByTestId("confirm-dialog");
    await dialog.getByRole("button", { name: "Remove member" }).click();
    await toast(admin, "Member removed.").waitFor();
    await row.waitFor({ state: "detached" });
    expect((await listMembers(tenant.scope, processBerth().db)).some((m) => m.email === graceEmail)).toBe(
      false,
    );
    await shot(admin, "members-after-remove");
    for (const errors of pageErrors) expect(errors).toEqual([]);
  });
});
