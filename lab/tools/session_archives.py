"""The folders of sessions a tool reads, from the paths it was given: a folder as it is, or a session archive
(TAG-sessions.tgz as a device call brings it back, stored as lab/records/device/*/sessions.tgz) unpacked once into a
scratch folder. Archives keep the records small enough to travel with the working tree to the device machines."""
import hashlib
import os
import tarfile


def _unpacked_name(path):
    stat = os.stat(path)
    key = f"{os.path.abspath(path)}:{stat.st_size}:{stat.st_mtime_ns}"
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def session_roots(paths, scratch):
    """One folder of session folders per path; an archive is unpacked under scratch/unpacked/ unless it already is."""
    roots = []
    for path in paths:
        if os.path.isdir(path):
            roots.append(path)
            continue
        if not (os.path.isfile(path) and path.endswith((".tgz", ".tar.gz"))):
            raise SystemExit(f"{path}: neither a folder of sessions nor a session archive (.tgz)")
        target = os.path.join(scratch, "unpacked", _unpacked_name(path))
        if not os.path.isdir(target):
            partial = target + ".part"
            os.makedirs(partial, exist_ok=True)
            with tarfile.open(path) as archive:
                for member in archive.getmembers():
                    if member.name.startswith("/") or ".." in member.name.split("/") or not (member.isdir() or member.isfile()):
                        raise SystemExit(f"{path}: unsafe or unexpected entry '{member.name}'")
                archive.extractall(partial)
            os.rename(partial, target)
        roots.append(target)
    return roots
