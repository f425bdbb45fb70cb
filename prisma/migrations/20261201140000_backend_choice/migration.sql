-- Several backends in one deployment: a tenant's default backend and an agent's own choice (null: inherit).
ALTER TABLE "tenants" ADD COLUMN "default_backend" "WorkspaceBackendKind";
ALTER TABLE "agents" ADD COLUMN "backend" "WorkspaceBackendKind";
