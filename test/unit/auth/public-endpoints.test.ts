import { describe, expect, it } from "vitest";
import { isPublicAuthEndpoint } from "@/server/auth/public-endpoints";

describe("isPublicAuthEndpoint", () => {
  it("lets the dashboard's sign-in, sign-out and session endpoints through", () => {
    expect(isPublicAuthEndpoint("/api/auth/sign-in/email")).toBe(true);
    expect(isPublicAuthEndpoint("/api/auth/sign-out")).toBe(true);
    expect(isPublicAuthEndpoint("/api/auth/get-session/")).toBe(true);
  });

  it("refuses sign-up and better-auth's own organization and API-key management", () => {
    for (const path of [
      "/api/auth/sign-up/email",
      "/api/auth/organization/create",
      "/api/auth/organization/update-member-role",
      "/api/auth/api-key/create",
      "/api/auth/api-key/list",
      // account.changePassword (tRPC) always ends the other sessions; the raw endpoint could keep them.
      "/api/auth/change-password",
      "/api/auth/sign-in/email/../../organization/create",
      "/api/authx/sign-in/email",
      "/sign-in/email",
    ]) {
      expect(isPublicAuthEndpoint(path), path).toBe(false);
    }
  });
});
