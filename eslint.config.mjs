import tseslint from "typescript-eslint";

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
      "next-env.d.ts",
      "prisma/schema-engine-wasm.mjs",
      "node20-polyfills.mjs",
      "eslint.config.mjs",
      "next.config.mjs",
      "postcss.config.mjs",
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
  {
    // The workspace engine is a library: no web, database or queue code.
    files: ["server/workspace/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["@trpc/*", "next", "next/*", "bullmq", "ioredis", "@prisma/*", "@/generated/*"],
              message: "server/workspace is a library: no web, database or queue code.",
            },
            {
              group: ["@/server/api/*", "@/server/modules/*", "@/server/queue/*", "@/server/env*"],
              message: "server/workspace depends on nothing above it.",
            },
          ],
        },
      ],
    },
  },
  {
    // Domain modules never import the transport; only *.data.ts may touch Prisma.
    files: ["server/modules/**/*.ts"],
    ignores: ["server/modules/**/*.data.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["@trpc/server", "@trpc/server/*"],
              message: "Domain code throws AppError; the transport maps it.",
            },
            {
              group: ["@/generated/prisma/client", "@prisma/client", "@/server/db"],
              message: "Only *.data.ts files may import Prisma.",
            },
          ],
        },
      ],
    },
  },
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
