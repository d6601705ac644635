# syntax=docker/dockerfile:1
#
# backlog-scaler container image.
#
#   docker build -t backlog-scaler:dev .
#
# Builds the binary from source in the builder stage, then copies it into a
# distroless runtime. Every base image is a build argument (the defaults are
# the images a normal `docker build` pulls):
#   RUST_IMAGE     the builder stage's base (default rust:1.94-bookworm)
#   RUNTIME_IMAGE  the runtime base (default distroless cc-debian12:nonroot)
# (The `syntax` line above names BuildKit's Dockerfile frontend; BuildKit's
# BUILDKIT_SYNTAX build argument overrides it, podman/buildah ignore it.)
#
# From a binary built on the host instead (what CI does, so it does not compile
# twice): make a build context that holds the binary and name it with
# PREBUILT_BINARY (a path inside the context). The builder stage then skips its
# package installs and the compile and only runs the shared-library check, so
# any Debian 12 userland (a shell, ldd) will do as RUST_IMAGE. The binary
# must come from `.ci/build-release` on Debian 12 (glibc 2.36), as the runtime
# is Debian 12:
#
#   mkdir ctx && cp target/release/backlog-scaler ctx/
#   docker build -f Dockerfile --build-arg PREBUILT_BINARY=backlog-scaler \
#     --build-arg RUST_IMAGE=debian:bookworm -t backlog-scaler:dev ctx
#
# `.ci/image` does exactly this with podman, from bases it builds locally with
# debootstrap, and `.ci/image-check` runs the result (docs/decisions/0016).
#
# Builder: the project's own release build (`.ci/build-release`, which runs
# `cargo build --release --locked`), the same script CI runs before it builds
# this image from that binary.
# Runtime: distroless (glibc, OpenSSL, CA certificates; no shell, no package
# manager), as the numeric non-root user 65532 that k8s/deployment.yaml's
# securityContext also names.

ARG RUST_IMAGE=rust:1.94-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${RUST_IMAGE} AS builder
# Empty: build from source. Otherwise the path, inside the build context, of a
# binary `.ci/build-release` already built (see the header).
ARG PREBUILT_BINARY=
# cmake, g++: librdkafka's CMake build (rdkafka `cmake-build`) and aws-lc-sys.
# libssl-dev, pkg-config: rdkafka `ssl` links the system OpenSSL (libssl3 is in
# the runtime image). zlib1g-dev: librdkafka's compression. protoc comes from
# the protoc-bin-vendored crate, so no protobuf-compiler package.
RUN if [ -n "$PREBUILT_BINARY" ]; then exit 0; fi \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      cmake g++ libssl-dev pkg-config zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The cache mounts keep the registry and target/ between builds; the binary is
# copied out in the same step because a cache mount is not part of the image.
# The runtime image may lack libz (it has glibc, libgcc_s and OpenSSL), so the
# one library the binary needs beyond those is copied next to it; any other new
# shared library fails the build here rather than at start-up in a cluster.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    mkdir -p /out/lib \
 && if [ -n "$PREBUILT_BINARY" ]; then cp "$PREBUILT_BINARY" /out/backlog-scaler; \
    else bash .ci/build-release && cp target/release/backlog-scaler /out/backlog-scaler; fi \
 && ldd /out/backlog-scaler \
 && unexpected="$(ldd /out/backlog-scaler | awk '{print $1}' \
      | grep -Ev '^(linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|/lib/ld-linux-aarch64\.so\.1|libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1|libssl\.so\.3|libcrypto\.so\.3|libz\.so\.1)$' || true)" \
 && if [ -n "$unexpected" ]; then echo "unexpected shared libraries: $unexpected" >&2; exit 1; fi \
 && cp -L "$(ldd /out/backlog-scaler | awk '$1 == "libz.so.1" {print $3}')" /out/lib/libz.so.1

FROM ${RUNTIME_IMAGE}
COPY --from=builder /out/lib/libz.so.1 /usr/lib/libz.so.1
COPY --from=builder /out/backlog-scaler /usr/local/bin/backlog-scaler
# distroless `nonroot` is 65532:65532; stated numerically so that Kubernetes'
# runAsNonRoot can verify it without an /etc/passwd lookup.
USER 65532:65532
# 9090: gRPC (KEDA's scalerAddress); 8080: admin HTTP (/metrics, /healthz, /readyz, /explain).
EXPOSE 9090 8080
ENTRYPOINT ["/usr/local/bin/backlog-scaler", "serve"]
