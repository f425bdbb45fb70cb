import tseslint from "typescript-eslint";

const PRISMA = ["@prisma/*", "@/generated/*", "@/server/db"];
const DATA_MODULES = ["@/server/modules/**/*.data", "@/server/modules/**/*.data.ts"];
// server/workspace, except its declaration schemas (zod, no I/O): forms validate with them, data files
// parse JSON columns with them.
const WORKSPACE_BUT_SCHEMAS = {
  regex:
    "^@/server/workspace/(?!(mcp/types|skills/agent-seed|archive/archive-entries|drivers/kind|workspace-env)$)",
};

// server/agent, except the turn events' schema (zod, no I/O): the chat page and the client type their events.
const AGENT_BUT_SCHEMA = { regex: "^@/server/agent/(?!agent\\.schema$)" };
// The workspace drivers (server/workspace/drivers/<name>/, one folder each). Everything outside a driver
// reaches it through the seam and the registry (the .ts files at drivers/' root) only; a driver imports no
// other driver, only the shared folders beside them (host-folder/, exec-scripts/).
const DRIVER_FOLDERS = ["bubblewrap", "host-unconfined", "docker", "e2b", "kubernetes"];
const DRIVER_SHARED = ["host-folder", "exec-scripts", "exec-output"];
const DRIVER_INTERNALS = { regex: "^@/server/workspace/drivers/[^/]+/" };
/** What server/workspace may not import: it is a library (server/shared only below it). */
const WORKSPACE_LIBRARY = [
  [
    ["@trpc/*", "next", "next/*", "bullmq", "ioredis", ...PRISMA],
    "server/workspace is a library: no web, database or queue code.",
  ],
  [
    [
      "@/server/api/*",
      "@/server/modules/*",
      "@/server/agent/*",
      "@/server/queue/*",
      "@/server/engine/*",
      "@/server/composition/*",
      "@/server/config/*",
      "@/server/auth/*",
      "@/server/redis",
      "@/server/logger",
      "@/workers/*",
      "@/app/*",
    ],
    "server/workspace depends on nothing above it (server/shared only).",
  ],
];
// A TenantScope is proof that an auth gate checked membership: only server/auth may mint one.
const MINT_SCOPE = {
  name: "@/server/auth/scope",
  importNames: ["mintTenantScope"],
  message: "Only auth gates (server/auth) mint a TenantScope; use resolveTenantScope.",
};
const DRIVER_INTERNALS_MESSAGE =
  "Outside a driver, use the seam and the registry (server/workspace/drivers/*.ts), never a driver's folder.";

/** One zone: `files` may not import `groups` (each with the reason shown in the lint message). */
const zone = (files, groups, { rules = {}, ...extra } = {}) => ({
  files,
  ...extra,
  rules: {
    ...rules,
    "no-restricted-imports": [
      "error",
      {
        // A group is a list of gitignore patterns, or `{ regex }` where a negative lookahead is needed.
        patterns: groups.map(([group, message]) =>
          Array.isArray(group) ? { group, message } : { ...group, message },
        ),
      },
    ],
  },
});

function dependencyZones() {
  const above = "imports upward (ARCHITECTURE.md, dependency direction)";
  return [
    zone(
      ["app/**/*.{ts,tsx}"],
      [
        [
          // server/queue/retention: a pure constant (how long the jobs page can look back).
          ["@/server/engine/*", "@/server/queue/*", "!@/server/queue/retention", "@/workers/*"],
          `app/ reaches the engine through services: ${above}`,
        ],
        [WORKSPACE_BUT_SCHEMAS, `app/ reaches the engine through services (its schemas excepted): ${above}`],
        [
          AGENT_BUT_SCHEMA,
          `app/ runs no turn: it calls chat's services (the turn events' schema excepted): ${above}`,
        ],
        [[...PRISMA, ...DATA_MODULES], "app/ never touches the database: call a service."],
      ],
    ),
    zone(
      ["server/api/**/*.ts"],
      [
        [
          [
            "@/server/engine/*",
            "@/server/workspace/*",
            "@/server/agent/*",
            "@/server/queue/*",
            "@/workers/*",
            "@/app/*",
          ],
          `server/api calls services (and gets them from server/composition): ${above}`,
        ],
        [[...PRISMA, ...DATA_MODULES], "server/api calls services, never Prisma or *.data.ts."],
      ],
    ),
    zone(
      ["server/modules/**/*.ts"],
      [
        [
          ["@trpc/server", "@trpc/server/*", "@/server/api/*"],
          "Domain code throws AppError; the transport maps it.",
        ],
        [
          ["@/server/composition/*", "@/workers/*", "@/app/*"],
          `server/modules is composed, it does not compose: ${above}`,
        ],
        [
          ["@/server/queue/worker*", "@/server/queue/registry"],
          "Modules only enqueue (server/queue/enqueue).",
        ],
        [PRISMA.filter((group) => group !== "@/server/db"), "Only *.data.ts files may import Prisma."],
        [DRIVER_INTERNALS, DRIVER_INTERNALS_MESSAGE],
      ],
      {
        ignores: ["server/modules/**/*.data.ts"],
        rules: {
          // Services hand the root's database client to data functions, so they may name its type.
          "@typescript-eslint/no-restricted-imports": [
            "error",
            {
              paths: [
                MINT_SCOPE,
                {
                  name: "@/server/db",
                  message: "Only *.data.ts files may import Prisma (services may import its types).",
                  allowTypeImports: true,
                },
              ],
            },
          ],
        },
      },
    ),
    zone(
      ["server/modules/**/*.data.ts"],
      [
        [
          ["@trpc/server", "@trpc/server/*", "@/server/api/*"],
          "Domain code throws AppError; the transport maps it.",
        ],
        [
          ["@/server/composition/*", "@/server/engine/*", "@/server/queue/*", "@/workers/*", "@/app/*"],
          "A data file is queries only.",
        ],
        [
          WORKSPACE_BUT_SCHEMAS,
          "A data file is queries only (engine schemas excepted, to parse JSON columns).",
        ],
      ],
      { rules: { "@typescript-eslint/no-restricted-imports": ["error", { paths: [MINT_SCOPE] }] } },
    ),
    zone(
      ["workers/**/*.ts"],
      [
        [
          ["@/server/api/*", "@/app/*", "@trpc/*", "next", "next/*"],
          `Workers run jobs through services: ${above}`,
        ],
        [
          [...PRISMA.filter((group) => group !== "@/server/db"), ...DATA_MODULES],
          "Workers call services, never Prisma or *.data.ts.",
        ],
        [["@/server/agent/*"], "Workers run no turn: turns run in the API process (server/modules/chat)."],
        [DRIVER_INTERNALS, DRIVER_INTERNALS_MESSAGE],
      ],
    ),
    zone(
      ["server/agent/**/*.ts"],
      [
        [
          ["@trpc/*", "next", "next/*", "bullmq", "ioredis", ...PRISMA],
          "server/agent is the agent runtime: no web, database or queue code.",
        ],
        [
          [
            "@/server/api/*",
            "@/server/modules/*",
            "@/server/queue/*",
            "@/server/engine/*",
            "@/server/composition/*",
            "@/server/auth/*",
            "@/server/redis",
            "@/server/logger",
            "@/workers/*",
            "@/app/*",
          ],
          `server/agent takes what a turn needs through its ports (server/workspace, shared and config only): ${above}`,
        ],
        [DRIVER_INTERNALS, DRIVER_INTERNALS_MESSAGE],
      ],
    ),
    zone(
      ["server/engine/**/*.ts"],
      [
        [
          [
            "@/server/modules/*",
            "@/server/agent/*",
            "@/server/api/*",
            "@/server/composition/*",
            "@/workers/*",
            "@/app/*",
          ],
          `The engine takes what it needs as parameters (server/composition passes the provision gate): ${above}`,
        ],
        [PRISMA, "The engine has no database: workspace records are the modules' business."],
        [DRIVER_INTERNALS, DRIVER_INTERNALS_MESSAGE],
      ],
    ),
    zone(
      ["server/workspace/**/*.ts"],
      [
        ...WORKSPACE_LIBRARY,
        [
          // The in-sandbox gateway's file operations are the host-folder ones (its errno mapping, locked append).
          { regex: "^@/server/workspace/drivers/(?!host-folder/)[^/]+/" },
          DRIVER_INTERNALS_MESSAGE,
        ],
      ],
    ),
    // The seam and the registry: the registry alone names the drivers' folders.
    zone(["server/workspace/drivers/*.ts"], WORKSPACE_LIBRARY),
    zone(
      DRIVER_SHARED.map((shared) => `server/workspace/drivers/${shared}/**/*.ts`),
      [
        ...WORKSPACE_LIBRARY,
        [
          [...DRIVER_FOLDERS.map((name) => `@/server/workspace/drivers/${name}/*`), "../*"],
          "Code the drivers share depends on no driver.",
        ],
      ],
    ),
    ...DRIVER_FOLDERS.map((name) =>
      zone(
        [`server/workspace/drivers/${name}/**/*.ts`],
        [
          ...WORKSPACE_LIBRARY,
          [
            [
              ...DRIVER_FOLDERS.filter((other) => other !== name).map(
                (other) => `@/server/workspace/drivers/${other}/*`,
              ),
              "../*",
            ],
            "A driver imports no other driver: share code through drivers/host-folder or drivers/exec-scripts.",
          ],
        ],
      ),
    ),
    zone(
      ["server/queue/**/*.ts"],
      [
        [
          [
            "@/server/api/*",
            "@/server/engine/*",
            "@/server/workspace/*",
            "@/server/agent/*",
            "@/server/composition/*",
            "@/workers/*",
            "@/app/*",
            ...PRISMA,
          ],
          `The queue layer knows job definitions, not what runs them: ${above}`,
        ],
      ],
    ),
    zone(
      ["server/shared/**/*.ts", "server/config/**/*.ts"],
      [
        [
          [
            "@/server/api/*",
            "@/server/modules/*",
            "@/server/engine/*",
            "@/server/workspace/*",
            "@/server/agent/*",
            "@/server/queue/*",
            "@/server/composition/*",
            "@/server/auth/*",
            "@/workers/*",
            "@/app/*",
            ...PRISMA,
          ],
          "server/shared and server/config are the bottom layer.",
        ],
      ],
    ),
    zone(
      ["server/composition/**/*.ts"],
      [
        [
          ["@/server/api/*", "@/app/*", "@/workers/*"],
          "server/composition builds services for the transports; it imports none of them.",
        ],
        [DRIVER_INTERNALS, DRIVER_INTERNALS_MESSAGE],
      ],
    ),
  ];
}

// Typed lint: the promise rules matter most here (dockerode, BullMQ, MCP are all promise-heavy).
// Import boundaries encode ARCHITECTURE.md's dependency table.
export default tseslint.config(
  {
    ignores: [
      "node_modules/**",
      ".next/**",
      "generated/**",
      ".data/**",
      "dist/**",
      // Other checkouts of the repository (git worktrees) kept inside this one; gitignored.
      ".helpers/**",
      "next-env.d.ts",
      "prisma/schema-engine-wasm.mjs",
      "node20-polyfills.mjs",
      "eslint.config.mjs",
      "next.config.mjs",
      "postcss.config.mjs",
      // Plain package stand-ins installed through package.json's overrides (not part of the TS project).
      "scripts/stubs/**",
    ],
  },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/switch-exhaustiveness-check": "error",
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  // ARCHITECTURE.md's dependency table, row by row (one `no-restricted-imports` zone per folder). Relative
  // imports stay inside a folder; everything across folders goes through `@/`, so these patterns see it.
  ...dependencyZones(),
  {
    // Only server/auth mints a TenantScope (server/modules' zones carry the same path with their own).
    files: ["app/**/*.{ts,tsx}", "server/**/*.ts", "workers/**/*.ts", "scripts/**/*.ts"],
    ignores: ["server/auth/**", "server/modules/**"],
    rules: {
      // The typescript-eslint variant, so it does not replace the per-folder `no-restricted-imports` zones.
      "@typescript-eslint/no-restricted-imports": ["error", { paths: [MINT_SCOPE] }],
    },
  },
  {
    files: ["test/**/*.ts", "bench/**/*.ts", "scripts/**/*.ts"],
    rules: {
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-non-null-assertion": "off",
    },
  },
);
