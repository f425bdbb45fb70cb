# A Node 20 base for machines without a registry: berth-base:bookworm (debootstrap, see
# scripts/docker/build-base-image.sh; its Debian nodejs is 18) plus this machine's Node 20 binary and npm,
# copied in by build-image.sh --local-base. The binary is dynamically linked against glibc; bookworm's
# (2.36) runs the official Node 20 builds, which need glibc >= 2.28.
ARG FROM=berth-base:bookworm
FROM ${FROM}
COPY node /usr/local/bin/node
COPY npm/ /usr/local/lib/node_modules/npm/
RUN ln -sf ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -sf ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && node --version | grep -q '^v20\.' && npm --version
