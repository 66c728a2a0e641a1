*l
inputFP32"
shared_memory_regionr"
shared_memory_byte_size@"
shared_memory_offset€2D
logits
shared_memory_regionr
shared_memory_byte_size