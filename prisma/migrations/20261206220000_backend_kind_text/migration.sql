-- The stored backend kind is text checked against the driver registry (server/workspace/backends/registry.ts),
-- not a Postgres enum: a new driver is one folder and one registry line, no migration. Values are kept as they are.
-- AlterTable
ALTER TABLE "workspaces" ALTER COLUMN "backend_kind" TYPE TEXT USING "backend_kind"::text;

-- AlterTable
ALTER TABLE "tenants" ALTER COLUMN "default_backend" TYPE TEXT USING "default_backend"::text;

-- AlterTable
ALTER TABLE "agents" ALTER COLUMN "backend" TYPE TEXT USING "backend"::text;

-- AlterTable
ALTER TABLE "tenant_backend_settings" ALTER COLUMN "backend" TYPE TEXT USING "backend"::text;

-- DropEnum
DROP TYPE "WorkspaceBackendKind";
