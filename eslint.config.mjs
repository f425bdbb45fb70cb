import tseslint from "typescript-eslint";

const PRISMA = ["@prisma/*", "@/generated/*", "@/server/db"];
const DATA_MODULES = ["@/server/modules/**/*.data", "@/server/modules/**/*.data.ts"];
// server/workspace, except its declaration schemas (zod, no I/O): forms validate with them, data files
// parse JSON columns with them.
const WORKSPACE_BUT_SCHEMAS = {
  regex: "^@/server/workspace/(?!(mcp/types|skills/agent-seed|archive/archive-entries)$)",
};

/** One zone: `files` may not import `groups` (each with the reason shown in the lint message). */
const zone = (files, groups, extra = {}) => ({
  files,
  ...extra,
  rules: {
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
        [[...PRISMA, ...DATA_MODULES], "app/ never touches the database: call a service."],
      ],
    ),
    zone(
      ["server/api/**/*.ts"],
      [
        [
          ["@/server/engine/*", "@/server/workspace/*", "@/server/queue/*", "@/workers/*", "@/app/*"],
          `server/api calls services (and gets them from server/composition): ${above}`,
        ],
        [[...PRISMA, ...DATA_MODULES], "server/api calls services, never Prisma or *.data.ts."],
      ],
      // The web side's composition root builds auth over the database pool.
      { ignores: ["server/api/composition.ts"] },
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
        [PRISMA, "Only *.data.ts files may import Prisma."],
      ],
      { ignores: ["server/modules/**/*.data.ts"] },
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
      ],
    ),
    zone(
      ["server/engine/**/*.ts"],
      [
        [
          ["@/server/modules/*", "@/server/api/*", "@/server/composition/*", "@/workers/*", "@/app/*"],
          `The engine takes what it needs as parameters (server/composition passes the provision gate): ${above}`,
        ],
        [PRISMA, "The engine has no database: workspace records are the modules' business."],
      ],
    ),
    zone(
      ["server/workspace/**/*.ts"],
      [
        [
          ["@trpc/*", "next", "next/*", "bullmq", "ioredis", ...PRISMA],
          "server/workspace is a library: no web, database or queue code.",
        ],
        [
          [
            "@/server/api/*",
            "@/server/modules/*",
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
      ],
    ),
    zone(
      ["server/queue/**/*.ts"],
      [
        [
          [
            "@/server/api/*",
            "@/server/engine/*",
            "@/server/workspace/*",
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
    // A TenantScope is proof that an auth gate checked membership: only server/auth may mint one.
    files: ["app/**/*.{ts,tsx}", "server/**/*.ts", "workers/**/*.ts", "scripts/**/*.ts"],
    ignores: ["server/auth/**"],
    rules: {
      // The typescript-eslint variant, so it does not replace the per-folder `no-restricted-imports` zones.
      "@typescript-eslint/no-restricted-imports": [
        "error",
        {
          paths: [
            {
              name: "@/server/auth/scope",
              importNames: ["mintTenantScope"],
              message: "Only auth gates (server/auth) mint a TenantScope; use resolveTenantScope.",
            },
          ],
        },
      ],
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
