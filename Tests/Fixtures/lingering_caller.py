#!/usr/bin/env python3
"""A D-Bus client that stays on the bus after its answer, unlike busctl and gdbus: polkit then cannot mistake
the caller's leaving for the end of its check. Connects to ADDRESS_PATH (a unix socket), waits for a line on
stdin (so that an authentication agent can be registered for this process first), calls METHOD with one string
ARGUMENT on DEST PATH INTERFACE with interactive authorization allowed, prints `error NAME: TEXT` or `ok`, and
stays connected until stdin closes.

usage: lingering_caller.py ADDRESS_PATH DEST PATH INTERFACE METHOD ARGUMENT
"""
import os, socket, struct, sys

address, dest, path, interface, method, argument = sys.argv[1:7]


def pad(buffer, alignment):
    buffer.extend(b"\0" * (-len(buffer) % alignment))


def string(buffer, text, code=b"s"):
    data = text.encode()
    if code == b"g":
        buffer.append(len(data))
    else:
        pad(buffer, 4)
        buffer.extend(struct.pack("<I", len(data)))
    buffer.extend(data + b"\0")


def message(serial, destination, object_path, interface_name, member, body_signature="", body=b"", flags=0):
    fields = bytearray()
    for code, kind, value in ((1, b"o", object_path), (2, b"s", interface_name), (3, b"s", member),
                              (6, b"s", destination)) + (((8, b"g", body_signature),) if body_signature else ()):
        pad(fields, 8)
        fields.append(code)
        string(fields, kind.decode(), b"g")
        string(fields, value, kind)
    header = bytearray(b"l\x01" + bytes([flags, 1]) + struct.pack("<III", len(body), serial, len(fields)))
    header.extend(fields)
    pad(header, 8)
    return bytes(header) + body


def read_exactly(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            sys.exit("the bus closed the connection")
        data += chunk
    return data


def receive(sock):
    fixed = read_exactly(sock, 16)
    body_length, _, fields_length = struct.unpack("<III", fixed[4:16])
    fields = read_exactly(sock, fields_length + (-(16 + fields_length) % 8))[:fields_length]
    body = read_exactly(sock, body_length)
    reply_serial, error_name, offset = None, None, 0
    while offset < len(fields):
        offset += -offset % 8
        code, signature_length = fields[offset], fields[offset + 1]
        kind = fields[offset + 2:offset + 2 + signature_length]
        offset += 3 + signature_length
        if kind in (b"s", b"o"):
            offset += -offset % 4
            (length,) = struct.unpack("<I", fields[offset:offset + 4])
            value = fields[offset + 4:offset + 4 + length].decode()
            offset += 5 + length
        elif kind == b"g":
            length = fields[offset]
            value = fields[offset + 1:offset + 1 + length].decode()
            offset += 2 + length
        else:
            offset += -offset % 4
            (value,) = struct.unpack("<I", fields[offset:offset + 4])
            offset += 4
        if code == 5:
            reply_serial = value
        elif code == 4:
            error_name = value
    text = ""
    if error_name and len(body) >= 4:
        (length,) = struct.unpack("<I", body[:4])
        text = body[4:4 + length].decode()
    return fixed[1], reply_serial, error_name, text


sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(address)
sock.sendall(b"\0AUTH EXTERNAL " + str(os.geteuid()).encode().hex().encode() + b"\r\n")
if not read_exactly(sock, 3) == b"OK ":
    sys.exit("the bus refused EXTERNAL authentication")
while not sock.recv(1) == b"\n":
    pass
sock.sendall(b"BEGIN\r\n")
sock.sendall(message(1, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello"))
while receive(sock)[1] != 1:
    pass

sys.stdin.readline()
body = bytearray()
string(body, argument)
# Flag 4: ALLOW_INTERACTIVE_AUTHORIZATION.
sock.sendall(message(2, dest, path, interface, method, "s", bytes(body), flags=4))
while True:
    kind, reply_serial, error_name, text = receive(sock)
    if reply_serial == 2:
        print(f"error {error_name}: {text}" if error_name else "ok", flush=True)
        break
sys.stdin.read()
