-- CreateTable
CREATE TABLE "tenant_backend_settings" (
    "tenant_id" TEXT NOT NULL,
    "backend" "WorkspaceBackendKind" NOT NULL,
    "settings" JSONB NOT NULL DEFAULT '{}',
    "secret_sealed" TEXT,
    "secret_hint" TEXT,
    "updated_by" TEXT,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "tenant_backend_settings_pkey" PRIMARY KEY ("tenant_id","backend")
);

-- AddForeignKey
ALTER TABLE "tenant_backend_settings" ADD CONSTRAINT "tenant_backend_settings_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;
