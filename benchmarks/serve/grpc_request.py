"""Writes one KServe v2 ModelInfer request as a gRPC message (the 5-byte length prefix and the
protobuf), for h2load to send as it is: SERVE_IMAGES u8 images in raw_input_contents, the
probabilities asked for. The few fields are encoded here by hand (field numbers from
apps/serve/grpc/kserve_v2.proto), so that no protobuf package is needed on the GPU machine.

usage: grpc_request.py MODEL_NAME N C H W OUT"""
import struct
import sys


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, payload):  # a length-delimited field (strings, bytes, messages, packed)
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def main():
    name, n, c, h, w, out = sys.argv[1], *map(int, sys.argv[2:6]), sys.argv[6]
    shape = b"".join(varint(d) for d in (n, c, h, w))
    tensor = field(1, b"input") + field(2, b"UINT8") + field(3, shape)  # InferInputTensor
    output = field(1, b"probabilities")  # InferRequestedOutputTensor
    pixels = (bytes(range(256)) * (n * c * h * w // 256 + 1))[: n * c * h * w]
    message = field(1, name.encode()) + field(5, tensor) + field(6, output) + field(7, pixels)
    with open(out, "wb") as f:
        f.write(struct.pack(">BI", 0, len(message)) + message)


main()
