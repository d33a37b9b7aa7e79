"""Import keras-hub without tensorflow and the hub clients (the device machine has neither, and no network): those
modules are stubbed, tensorflow refused (keras-hub falls back to its backend-only paths). exec() this before
importing keras_hub.  Used by gemma_2cores.py (round 37, lead: Gemma's auto_shard on 2 idle cores)."""
import sys, types, importlib.abc, importlib.machinery
STUB = ('tensorflow','tensorflow_text','kagglehub','kagglesdk','huggingface_hub','tokenizers','sentencepiece','pandas','h5py','requests','safetensors')
class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        m = types.ModuleType(spec.name); m.__path__ = []; m.__getattr__ = lambda a: (_ for _ in ()).throw(AttributeError(a)) if a.startswith('__') else type(a, (), {}); return m
    def exec_module(self, m): pass
class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        top = name.split('.')[0]
        if top in ('tensorflow','tensorflow_text'):
            return None if False else (_ for _ in ()).throw(ImportError('no ' + name))
        if top in STUB:
            return importlib.machinery.ModuleSpec(name, _Loader(), is_package=True)
sys.meta_path.insert(0, _Finder())
