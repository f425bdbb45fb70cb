-- CreateEnum
CREATE TYPE "WarmMachineState" AS ENUM ('CREATING', 'IDLE', 'CLAIMED');

-- CreateTable
CREATE TABLE "warm_machines" (
    "id" TEXT NOT NULL,
    "backend_kind" VARCHAR(32) NOT NULL,
    "pool_key" VARCHAR(64) NOT NULL,
    "state" "WarmMachineState" NOT NULL,
    "handle" JSONB,
    "workspace_id" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "ready_at" TIMESTAMP(3),
    "claimed_at" TIMESTAMP(3),

    CONSTRAINT "warm_machines_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "warm_pool_uses" (
    "id" BIGSERIAL NOT NULL,
    "backend_kind" VARCHAR(32) NOT NULL,
    "hit" BOOLEAN NOT NULL,
    "at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "warm_pool_uses_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "warm_machines_backend_kind_pool_key_state_ready_at_idx" ON "warm_machines"("backend_kind", "pool_key", "state", "ready_at");

-- CreateIndex
CREATE INDEX "warm_pool_uses_backend_kind_at_idx" ON "warm_pool_uses"("backend_kind", "at");
