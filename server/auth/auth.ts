import { apiKey } from "@better-auth/api-key";
import { betterAuth } from "better-auth";
import { prismaAdapter } from "better-auth/adapters/prisma";
import { organization } from "better-auth/plugins";
import { createAccessControl } from "better-auth/plugins/access";
import { defaultStatements } from "better-auth/plugins/organization/access";
import type { Db } from "@/server/db";
import { generateApiKey } from "@/server/auth/api-key-material";

/**
 * better-auth for Berth: email/password sign-in with cookie sessions, the organization plugin as
 * our tenants and memberships, and tenant-owned API keys used as `Authorization: Bearer` tokens.
 * Everything better-auth stores lives in our own Prisma models (prisma/auth.prisma,
 * prisma/tenant.prisma) through the modelName/fields remapping below.
 */
export type AuthConfig = {
  /** Signs cookies and tokens. At least 32 random characters in production. */
  secret: string;
  /** Public origin of the app, e.g. http://localhost:3000. `https://` turns on Secure cookies. */
  baseUrl: string;
  prisma: Db;
  /** Extra origins allowed to send cookie-authenticated requests (the base URL always is). */
  trustedOrigins?: string[];
  /**
   * Where better-auth's own log lines go (e.g. a pino child logger). Default: its console logger.
   * Rejected API keys and wrong passwords are logged by better-auth at error/warn level.
   */
  log?: (level: "debug" | "info" | "warn" | "error", message: string, ...args: unknown[]) => void;
};

/** Prefix of every Berth API key, so leaked keys are easy to recognise and scan for. */
export const API_KEY_PREFIX = "berth_";

// Org plugin statements plus `apiKey`, which the API-key plugin checks for tenant-owned keys.
const accessControl = createAccessControl({
  ...defaultStatements,
  apiKey: ["create", "read", "update", "delete"],
});
const allApiKeyActions = ["create", "read", "update", "delete"] as const;
const tenantRoles = {
  owner: accessControl.newRole({
    organization: ["update", "delete"],
    member: ["create", "update", "delete"],
    invitation: ["create", "cancel"],
    ac: ["create", "read", "update", "delete"],
    apiKey: [...allApiKeyActions],
  }),
  admin: accessControl.newRole({
    organization: ["update"],
    member: ["create", "update", "delete"],
    invitation: ["create", "cancel"],
    ac: ["read"],
    apiKey: [...allApiKeyActions],
  }),
  member: accessControl.newRole({ ac: ["read"] }),
  viewer: accessControl.newRole({ ac: ["read"] }),
};

export function createAuth(config: AuthConfig) {
  return betterAuth({
    secret: config.secret,
    baseURL: config.baseUrl,
    trustedOrigins: [config.baseUrl, ...(config.trustedOrigins ?? [])],
    telemetry: { enabled: false },
    // better-auth's own limiter (on when NODE_ENV is production, as under `npm start`) keeps its counts in
    // each process's memory and keys them by a client-chosen header, or, with none, puts every client in one
    // bucket: 3 sign-ins in 10 s from anyone and the next admin is refused. Sign-in is guarded instead by
    // server/auth/sign-in-guard.ts: failures only, per resolved client address and per account, in Redis.
    rateLimit: { enabled: false },
    ...(config.log ? { logger: { log: config.log } } : {}),
    database: prismaAdapter(config.prisma, { provider: "postgresql" }),
    emailAndPassword: { enabled: true, minPasswordLength: 8, autoSignIn: true },
    user: { modelName: "user" },
    session: { modelName: "authSession" },
    account: { modelName: "authAccount" },
    verification: { modelName: "authVerification" },
    advanced: {
      // better-auth sets HttpOnly and SameSite=Lax on its session cookies by default; Secure
      // (and the __Secure- prefix) only when the app is served over https.
      useSecureCookies: config.baseUrl.startsWith("https://"),
      defaultCookieAttributes: { httpOnly: true, sameSite: "lax" },
      cookiePrefix: "berth",
    },
    plugins: [
      organization({
        ac: accessControl,
        roles: tenantRoles,
        creatorRole: "owner",
        // Tenants are created by Berth's own bootstrap/admin flows, not by any signed-in user.
        allowUserToCreateOrganization: false,
        schema: {
          organization: { modelName: "tenant" },
          member: { modelName: "membership", fields: { organizationId: "tenantId" } },
          invitation: { modelName: "invitation", fields: { organizationId: "tenantId" } },
          session: { fields: { activeOrganizationId: "activeTenantId" } },
        },
      }),
      apiKey({
        references: "organization",
        defaultPrefix: API_KEY_PREFIX,
        // Random, except the derived key of a create with an idempotency key (api-key-material.ts).
        customKeyGenerator: generateApiKey,
        requireName: true,
        maximumNameLength: 64,
        // Typed clients call the API many times a second; the plugin's default is 10 per day.
        rateLimit: { enabled: false },
        enableMetadata: false,
        // Store the prefix plus a few characters so the dashboard can tell keys apart.
        startingCharactersConfig: { shouldStore: true, charactersLength: API_KEY_PREFIX.length + 6 },
        schema: {
          apikey: { modelName: "apiKey", fields: { referenceId: "tenantId", lastRequest: "lastUsedAt" } },
        },
      }),
    ],
  });
}

export type BerthAuth = ReturnType<typeof createAuth>;
